//! [`MtpDecoder`]: multi-token prediction (Nguyen et al. 2025, "Accelerating Codec-based
//! Speech Synthesis with Multi-Token Prediction and Speculative Decoding", §III-B and §III-C): each forward pass reads
//! `k` heads at the last position and emits up to `k` tokens, fed back in one `extend` call.
//!
//! ```text
//! logits of heads 0..k at the end of the sequence
//!   ├─ independent: token i drawn from head i alone (the sampler's full warping, history =
//!   │               every token so far, the block's earlier tokens included)
//!   └─ Viterbi:     top_k candidates per head ─▶ m ≤ k·top_k distinct tokens ─▶ S [k, m],
//!                   Q [m, m] ─▶ best path (Algorithm 1, log space) ─▶ k tokens
//! emit the block up to end-of-sequence or max_tokens; extend(blocks) ─▶ next logits
//! ```
//!
//! # Sampling with Viterbi
//! The paper keeps diversity with top-k sampling before the path search; here:
//! - the state scores are `S_t = softmax(penalised head-t scores / τ)` over the whole vocabulary,
//!   with τ the sampler's temperature (1 when greedy) and end-of-sequence masked where the
//!   minimum length forbids it; τ weighs the heads against `Q` (a low τ lets the heads dominate);
//! - greedy (temperature 0): each head's candidates are its `top_k` highest scores, so the
//!   search is deterministic;
//! - sampling (temperature > 0): each head's candidates are `top_k` tokens drawn *without
//!   replacement* from the sampler's distribution (temperature, top-k, top-p, repetition
//!   penalty; the first draw also applies repetition-aware resampling), from that sequence's own
//!   random stream; the path is then the best one through these random candidates. A larger
//!   `top_k` widens the search (and, as the paper's Table II shows, diversity).
//!
//! As in the paper, the states of every step are all `m` candidates (scored by that step's own
//! head), not only the step's own: a token proposed by head 3 may be emitted at position 2, so
//! even `top_k = 1` with several heads is not the same as independent sampling.
//!
//! End-of-sequence among the candidates ends the path where it appears
//! ([`absorb_after`](crate::viterbi::absorb_after)): the steps after it add nothing. Scored
//! like any token instead, it paid for the steps after it (the heads' scores there and
//! transitions out of it, which the training codes never contain), and on the bundled corpus
//! Viterbi at temperature 1 stopped at end-of-sequence in 3 of 8 sentences (k = 8, top_k = 3)
//! where AR and independent MTP stopped in all 8, running the others to the length limit.
//!
//! With [`ViterbiConfig::link_previous`] the block's first token is also scored by
//! `Q(last emitted token, a_1)`, chaining blocks; on the toy bigram test (noisy heads 1..3)
//! this raised the share of tokens greedy AR would also have chosen from 0.56 to 0.72
//! (independent heads: 0.34).
//!
//! With one head and blocks not linked, greedy Viterbi equals AR for any `top_k` (a one-step path is the head's argmax),
//! and sampled Viterbi with `top_k = 1` equals AR (its only candidate is AR's draw). Independent
//! MTP with one head is AR exactly, greedy or sampled.
//!
//! # Statistics
//! `drafted` counts the tokens proposed by heads 1.. (after clipping to `max_tokens`) and
//! `accepted` those of them consumed before the block ended (end-of-sequence included): MTP
//! keeps everything it proposes, so acceptance falls below 1 only at the end of a sequence;
//! `tokens_per_forward` is the figure of merit.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;

use crate::decoder::{
    Decoder, Generation, ModelCall, Request, Sequence, cache_capacity, check_batch, timed_call,
};
use crate::error::{InferError, Result};
use crate::fastexp::sum_f64;
use crate::lm::{LanguageModel, Logits, LogitsRequest};
use crate::sampler::{
    LogNormalizer, SamplerConfig, log_normalizer, log_softmax, sample_scaled, top_k_indices,
};
use crate::transitions::Transitions;
use crate::viterbi::{Viterbi, ViterbiConfig, absorb_after, union_candidates};

/// Viterbi path selection: its settings, the transition statistics and the solver's buffers.
#[derive(Debug, Clone)]
pub(crate) struct PathSelection {
    config: ViterbiConfig,
    transitions: Arc<Transitions>,
    solver: Viterbi,
    /// Scratch: `log S` `[heads, m]` and `log Q` `[m, m]`.
    log_s: Vec<f32>,
    log_q: Vec<f32>,
    /// Scratch of the exponential pass of a head's log-normalizer.
    scratch: Vec<f32>,
}

/// A head's log-probabilities: its scores and their normalizer, or (when no score is finite)
/// the whole log-softmax.
enum HeadLogS {
    Normalized(Vec<f32>, LogNormalizer),
    Full(Vec<f32>),
}

/// Multi-token prediction with `heads` heads per forward, each head sampled on its own or the
/// block chosen by Viterbi path selection (see the module doc).
#[derive(Debug, Clone)]
pub struct MtpDecoder {
    heads: usize,
    viterbi: Option<PathSelection>,
}

impl MtpDecoder {
    /// `heads` tokens per forward, each head sampled on its own.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when `heads = 0`.
    pub fn new(heads: usize) -> Result<Self> {
        if heads == 0 {
            return Err(InferError::InvalidSetting {
                name: "heads",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        Ok(Self {
            heads,
            viterbi: None,
        })
    }

    /// `heads` tokens per forward, the block chosen by Viterbi over `transitions`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when `heads = 0` or `config.top_k = 0`.
    pub fn with_viterbi(
        heads: usize,
        config: ViterbiConfig,
        transitions: Arc<Transitions>,
    ) -> Result<Self> {
        let mut decoder = Self::new(heads)?;
        decoder.viterbi = Some(PathSelection::new(config, transitions)?);
        Ok(decoder)
    }

    /// Tokens per forward.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The Viterbi settings, if path selection is on.
    pub fn viterbi(&self) -> Option<ViterbiConfig> {
        self.viterbi.as_ref().map(|v| v.config)
    }

    /// Emits sequence `b`'s block from its `n` head rows; returns the tokens to feed back
    /// (empty once the sequence has stopped).
    fn step(
        &mut self,
        logits: &Logits,
        b: usize,
        seq: &mut Sequence,
        sampler: &SamplerConfig,
    ) -> Result<Vec<u32>> {
        let n = self.heads.min(seq.remaining());
        let proposal = match &mut self.viterbi {
            None => None,
            Some(selection) => Some(selection.path(logits, b, n, seq, sampler)?),
        };
        let mut block = Vec::with_capacity(n);
        let mut consumed = 0;
        for head in 0..n {
            let token = match &proposal {
                Some(path) => path[head],
                None => {
                    let banned = seq.banned(0);
                    sampler.draw(logits.row(b, 0, head), &seq.tokens, banned, &mut seq.rng)
                }
            };
            consumed += 1;
            if !seq.push(token) {
                break;
            }
            block.push(token);
            if !seq.is_active() {
                break;
            }
        }
        seq.stats.drafted += n - 1;
        seq.stats.accepted += consumed - 1;
        if !seq.is_active() {
            block.clear();
        }
        Ok(block)
    }
}

impl PathSelection {
    /// Path selection over `transitions` with `config` (validated).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when `config.top_k = 0`.
    pub(crate) fn new(config: ViterbiConfig, transitions: Arc<Transitions>) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            config,
            transitions,
            solver: Viterbi::new(),
            log_s: Vec::new(),
            log_q: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// The vocabulary of the transition matrix.
    pub(crate) fn vocab(&self) -> usize {
        self.transitions.vocab_size()
    }

    /// The Viterbi block of `n` tokens for sequence `b`.
    fn path(
        &mut self,
        logits: &Logits,
        b: usize,
        n: usize,
        seq: &mut Sequence,
        sampler: &SamplerConfig,
    ) -> Result<Vec<u32>> {
        let rows: Vec<&[f32]> = (0..n).map(|head| logits.row(b, 0, head)).collect();
        let banned: Vec<Option<u32>> = (0..n).map(|head| seq.banned(head)).collect();
        let eos = seq.eos();
        self.select(&rows, &banned, &seq.tokens, eos, sampler, &mut seq.rng)
    }

    /// The best path of `rows.len()` tokens through the candidates of the head scores `rows`
    /// (position `i` scored by `rows[i]`, with `banned[i]` excluded), given the tokens so far
    /// (`history`: repetition penalty and, with `link_previous`, the block's link) and the
    /// end-of-sequence class `eos` (which ends the path where it appears).
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] from the solver (no position, no candidate).
    pub(crate) fn select(
        &mut self,
        rows: &[&[f32]],
        banned: &[Option<u32>],
        history: &[u32],
        eos: Option<u32>,
        sampler: &SamplerConfig,
        rng: &mut StdRng,
    ) -> Result<Vec<u32>> {
        let temperature = if sampler.is_greedy() {
            1.0
        } else {
            sampler.temperature
        };
        let mut per_head = Vec::with_capacity(rows.len());
        // Per head its penalised scores and what turns one into a log-probability: only the
        // candidates' log-probabilities are needed, not the whole log-softmax.
        let mut log_s_heads = Vec::with_capacity(rows.len());
        for (&row, &banned) in rows.iter().zip(banned) {
            let scores = sampler.penalised(row, history, banned);
            let candidates = if sampler.is_greedy() {
                let mut top = top_k_indices(&scores, self.config.top_k);
                top.retain(|&t| scores[t as usize] > f32::NEG_INFINITY);
                top
            } else {
                draw_candidates(sampler, row, history, banned, self.config.top_k, rng)
            };
            per_head.push(candidates);
            self.scratch.resize(scores.len(), 0.0);
            let log_s = match log_normalizer(&scores, temperature, &mut self.scratch) {
                Some(norm) => HeadLogS::Normalized(scores, norm),
                None => HeadLogS::Full(log_softmax(&scores, temperature)),
            };
            log_s_heads.push(log_s);
        }
        let candidates = union_candidates(&per_head);
        let m = candidates.len();
        self.log_s.clear();
        for log_s in &log_s_heads {
            self.log_s.extend(candidates.iter().map(|&t| match log_s {
                HeadLogS::Normalized(scores, norm) => norm.log_prob(scores[t as usize]),
                HeadLogS::Full(full) => full[t as usize],
            }));
        }
        self.transitions.block(&candidates, &mut self.log_q);
        let mut prior: Option<Vec<f32>> = match history.last() {
            Some(&previous) if self.config.link_previous => Some(
                candidates
                    .iter()
                    .map(|&t| self.transitions.log_q(previous, t))
                    .collect(),
            ),
            _ => None,
        };
        // End-of-sequence ends the path (see `absorb_after`); its extra state decodes as EOS.
        let states = match eos.and_then(|e| candidates.iter().position(|&t| t == e)) {
            Some(last) => {
                absorb_after(last, &mut self.log_s, &mut self.log_q, prior.as_mut(), m);
                m + 1
            }
            None => m,
        };
        let path =
            self.solver
                .best_path_from(prior.as_deref(), &self.log_s, &self.log_q, states)?;
        Ok(path
            .states
            .iter()
            .map(|&j| match candidates.get(j) {
                Some(&t) => t,
                None => eos.unwrap_or_default(),
            })
            .collect())
    }
}

/// `k` distinct tokens drawn without replacement from the sampler's distribution (fewer when it
/// has fewer tokens of positive probability). The first is [`SamplerConfig::draw`]'s token, so a
/// single candidate is exactly what AR would sample.
fn draw_candidates(
    sampler: &SamplerConfig,
    row: &[f32],
    history: &[u32],
    banned: Option<u32>,
    k: usize,
    rng: &mut StdRng,
) -> Vec<u32> {
    let mut probs = sampler.distribution(row, history, banned);
    let first = sampler.draw_from(&probs, row, history, banned, rng);
    let mut chosen = vec![first];
    probs[first as usize] = 0.0;
    while chosen.len() < k {
        // Drawn from the mass left (the uniform draw scaled by it), not from a renormalised
        // copy: one pass for the sum instead of three.
        let mass = sum_f64(&probs);
        if mass.is_nan() || mass <= 0.0 {
            break;
        }
        let t = sample_scaled(&probs, mass, rng);
        chosen.push(t);
        probs[t as usize] = 0.0;
    }
    chosen
}

impl<M: LanguageModel> Decoder<M> for MtpDecoder {
    fn name(&self) -> String {
        match self.viterbi {
            Some(_) => "mtp-viterbi".into(),
            None => "mtp".into(),
        }
    }

    fn generate(
        &mut self,
        model: &M,
        requests: &[Request<M::Prompt>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Generation>> {
        check_batch(requests, sampler)?;
        if self.heads > model.n_heads() {
            return Err(InferError::InvalidSetting {
                name: "heads",
                value: self.heads.to_string(),
                expected: format!("at most the model's {} heads", model.n_heads()),
            });
        }
        let request = LogitsRequest::heads_at_last(self.heads);
        let mut sequences = Sequence::for_batch(requests, model.eos_token());
        let mut cache = model.new_cache(requests.len(), cache_capacity(model, requests, 0))?;
        let prompts: Vec<M::Prompt> = requests.iter().map(|r| r.prompt.clone()).collect();
        let all = vec![true; requests.len()];
        let (batch, vocab) = (requests.len(), model.vocab_size());
        let mut logits = timed_call(&mut sequences, &all, ModelCall::Target, || {
            model.prefill(&mut cache, &prompts, request)
        })?;
        logits.check(batch, 1, self.heads, vocab)?;
        loop {
            let mut blocks = vec![Vec::new(); sequences.len()];
            for (b, seq) in sequences.iter_mut().enumerate() {
                if !seq.is_active() {
                    continue;
                }
                let start = Instant::now();
                blocks[b] = self.step(&logits, b, seq, sampler)?;
                seq.stats.decoder_time += start.elapsed();
            }
            let takes_part: Vec<bool> = blocks.iter().map(|b| !b.is_empty()).collect();
            if !takes_part.contains(&true) {
                break;
            }
            logits = timed_call(&mut sequences, &takes_part, ModelCall::Target, || {
                model.extend(&mut cache, &blocks, request)
            })?;
            logits.check(batch, 1, self.heads, vocab)?;
        }
        tracing::debug!(
            batch = requests.len(),
            heads = self.heads,
            "mtp decoding finished"
        );
        Ok(sequences.into_iter().map(Sequence::finish).collect())
    }
}
