//! [`SelfSpeculativeDecoder`]: the model's own MTP heads draft, its next-token head verifies in
//! the following forward (a Medusa-style chain, without a tree), with any [`AcceptanceRule`].
//!
//! Head `i` at a position predicts the token `i` steps after the next one. One forward per step:
//!
//! ```text
//! forward k:   block [y, d_1, …, d_γ]                      (y: last emitted token)
//!              head 0 at block position i → q_i, the target's law of the token after d_i
//!              verify d_1..d_γ (drawn from p_i = head i of the previous forward) against
//!              q_0..q_{γ−1}, bonus from q_γ → keep d_1..d_a, emit y'
//!              truncate the cache to … y d_1 … d_a
//!              heads 1..γ' at block position a → p'_i, d'_i ~ p'_i
//! forward k+1: block [y', d'_1, …, d'_γ']
//! ```
//!
//! The drafts of a head do not condition on the earlier drafts of the same step, but each `d_i`
//! is drawn from the very `p_i` the verifier divides by, so exact verification stays exact.
//! The first token comes from head 0 of the prefill, whose other heads give the first drafts.

use std::time::Instant;

use crate::decoder::{
    Decoder, Generation, ModelCall, Request, Sequence, cache_capacity, check_batch, timed_call,
};
use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, Logits, LogitsRequest};
use crate::sampler::{SamplerConfig, sample};
use crate::speculative::{Proposal, SpeculativeConfig, check_sampler, verify_phase};

/// Self-speculative decoding over a model with MTP heads. `config.max_gamma` (or `gamma` when
/// fixed) must not exceed the model's extra heads.
#[derive(Debug, Clone)]
pub struct SelfSpeculativeDecoder {
    config: SpeculativeConfig,
}

impl SelfSpeculativeDecoder {
    /// A decoder drafting `config.gamma` tokens per step from the extra heads.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] from [`SpeculativeConfig::validate`].
    pub fn new(config: SpeculativeConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self { config })
    }

    /// The settings.
    pub fn config(&self) -> &SpeculativeConfig {
        &self.config
    }
}

/// Per-sequence state between forwards.
struct Lane {
    /// Last emitted token, not yet in the cache.
    pending: u32,
    gamma: usize,
    drafts: Vec<u32>,
    draft_probs: Vec<Vec<f32>>,
    eos: Option<u32>,
}

impl Lane {
    /// Draws up to `gamma` drafts from heads `1..=gamma` at `(b, pos)` of `logits`, stopping
    /// after a drafted end-of-sequence. The drafts follow the tokens `seq` holds.
    fn draw(
        &mut self,
        logits: &Logits,
        (b, pos): (usize, usize),
        gamma: usize,
        seq: &mut Sequence,
        sampler: &SamplerConfig,
    ) {
        self.drafts.clear();
        self.draft_probs.clear();
        let mut history = seq.tokens.clone();
        for i in 1..=gamma {
            let probs = sampler.distribution(logits.row(b, pos, i), &history, seq.banned(i - 1));
            let token = sample(&probs, &mut seq.rng);
            self.drafts.push(token);
            self.draft_probs.push(probs);
            history.push(token);
            if Some(token) == self.eos {
                break;
            }
        }
    }
}

impl<M: LanguageModel> Decoder<M> for SelfSpeculativeDecoder {
    fn name(&self) -> String {
        format!("self-{}", self.config.name())
    }

    fn generate(
        &mut self,
        model: &M,
        requests: &[Request<M::Prompt>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Generation>> {
        check_batch(requests, sampler)?;
        check_sampler(sampler)?;
        let config = &self.config;
        let extra_heads = model.n_heads().saturating_sub(1);
        if config.max_gamma > extra_heads {
            return Err(InferError::InvalidSetting {
                name: if config.adaptive {
                    "max_gamma"
                } else {
                    "gamma"
                },
                value: config.max_gamma.to_string(),
                expected: format!("at most the model's {extra_heads} extra heads"),
            });
        }
        config.rule.validate(Some(model.vocab_size()))?;
        let eos = model.eos_token();
        let heads = 1 + config.max_gamma;
        let batch = requests.len();
        let mut sequences = Sequence::for_batch(requests, eos);
        let prompts: Vec<M::Prompt> = requests.iter().map(|r| r.prompt.clone()).collect();
        let mut cache = model.new_cache(batch, cache_capacity(model, requests, 1))?;
        let all = vec![true; batch];
        let first = timed_call(&mut sequences, &all, ModelCall::Target, || {
            model.prefill(&mut cache, &prompts, LogitsRequest::heads_at_last(heads))
        })?;
        let mut lanes = Vec::with_capacity(batch);
        for (b, seq) in sequences.iter_mut().enumerate() {
            let start = Instant::now();
            let probs = sampler.distribution(first.row(b, 0, 0), &seq.tokens, seq.banned(0));
            let token = sample(&probs, &mut seq.rng);
            seq.push(token);
            let mut lane = Lane {
                pending: token,
                gamma: config.gamma,
                drafts: Vec::new(),
                draft_probs: Vec::new(),
                eos,
            };
            let gamma = lane.gamma.min(seq.remaining().saturating_sub(1));
            if seq.is_active() {
                lane.draw(&first, (b, 0), gamma, seq, sampler);
            }
            lanes.push(lane);
            seq.stats.decoder_time += start.elapsed();
        }

        let request = LogitsRequest {
            heads,
            last_only: false,
        };
        loop {
            let proposals: Vec<Proposal<'_>> = lanes
                .iter()
                .map(|lane| Proposal {
                    pending: lane.pending,
                    drafts: &lane.drafts,
                    draft_probs: &lane.draft_probs,
                })
                .collect();
            let Some((logits, verdicts)) = verify_phase(
                model,
                &mut cache,
                &mut sequences,
                &proposals,
                &config.rule,
                sampler,
                request,
            )?
            else {
                break;
            };
            let rows = sequences.iter_mut().zip(lanes.iter_mut()).zip(verdicts);
            for (b, ((seq, lane), verdict)) in rows.enumerate() {
                let Some(verdict) = verdict else { continue };
                let start = Instant::now();
                let gamma = lane.drafts.len();
                let accepted = verdict.accepted;
                lane.pending = verdict.next;
                lane.gamma = config.next_gamma(lane.gamma, gamma, accepted);
                if seq.is_active() {
                    // The heads at the last kept position draft the next block.
                    let next_gamma = lane.gamma.min(seq.remaining().saturating_sub(1));
                    lane.draw(&logits, (b, accepted), next_gamma, seq, sampler);
                }
                seq.stats.decoder_time += start.elapsed();
            }
        }
        tracing::debug!(batch, decoder = %Decoder::<M>::name(self), "self-speculative decoding finished");
        Ok(sequences.into_iter().map(Sequence::finish).collect())
    }
}
