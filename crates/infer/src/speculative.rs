//! [`SpeculativeDecoder`]: a draft model proposes `γ` tokens, the target scores them all in one
//! forward, and an [`AcceptanceRule`] keeps a prefix (Leviathan et al. 2023; SSD, Lin et al. 2025,
//! Algorithm 1; PCG, Yanuka et al., Algorithm 1).
//!
//! ```text
//! per step, per active sequence b (own γ_b, own random stream):
//!   draft:  extend(pending_d) → p_0, x_0 ~ p_0; extend(x_0) → p_1, x_1 ~ p_1; … x_{γ−1}
//!   target: extend([pending_t, x_0, …, x_{γ−1}]) → q_0 … q_γ          (one forward)
//!   verify: keep x_0..x_{a−1}, emit y (correction, or bonus when a = γ)
//!   caches: target → … pending_t x_0..x_{a−1}          (pending_t ← y)
//!           draft  → … pending_d x_0..x_{min(a, γ−1)−1} (pending_d ← the kept drafts it lacks, y)
//!   γ_b:    adaptive: +2 when a = γ, −1 otherwise (floor 1, cap max_gamma)
//! ```
//!
//! Blocks are ragged across the batch (each sequence has its own γ and its own accepted
//! length); finished sequences pass empty blocks. Since every random draw of a sequence comes
//! from its own stream and neither model mixes sequences, a batch gives what decoding each
//! request alone gives. Target and draft distributions go through the same
//! [`SamplerConfig::distribution`] (temperature, top-k/p, repetition penalty, end-of-sequence
//! masked below `min_tokens`), so at temperature 0 every rule reproduces greedy AR.

use std::time::Instant;

use crate::decoder::{
    Decoder, Generation, ModelCall, Request, Sequence, cache_capacity, check_batch, timed_call,
};
use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, Logits, LogitsRequest};
use crate::sampler::{SamplerConfig, sample};
use crate::verify::{AcceptanceRule, Verdict, verify};

/// Draft length policy and acceptance rule of a speculative decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeculativeConfig {
    /// Draft length `γ` (the starting value when adaptive); at least 1.
    pub gamma: usize,
    /// Adapt `γ` per sequence: +2 after a fully accepted block, −1 otherwise (floor 1).
    pub adaptive: bool,
    /// Upper bound of an adaptive `γ` (at least `gamma`).
    pub max_gamma: usize,
    /// How drafts are accepted.
    pub rule: AcceptanceRule,
}

impl SpeculativeConfig {
    /// Fixed draft length `gamma` with `rule`.
    pub fn new(gamma: usize, rule: AcceptanceRule) -> Self {
        Self {
            gamma,
            adaptive: false,
            max_gamma: gamma,
            rule,
        }
    }

    /// Makes `γ` adaptive between 1 and `max_gamma`.
    pub fn with_adaptive(mut self, max_gamma: usize) -> Self {
        self.adaptive = true;
        self.max_gamma = max_gamma;
        self
    }

    /// Checks `gamma`, `max_gamma` and the rule.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if self.gamma == 0 {
            return Err(InferError::InvalidSetting {
                name: "gamma",
                value: "0".into(),
                expected: "at least 1 drafted token per step".into(),
            });
        }
        if self.max_gamma < self.gamma {
            return Err(InferError::InvalidSetting {
                name: "max_gamma",
                value: self.max_gamma.to_string(),
                expected: format!("at least gamma = {}", self.gamma),
            });
        }
        self.rule.validate(None)
    }

    /// The next draft length after a block of `drafted` tokens with `accepted` kept.
    pub fn next_gamma(&self, gamma: usize, drafted: usize, accepted: usize) -> usize {
        if !self.adaptive || drafted == 0 {
            gamma
        } else if accepted == drafted {
            (gamma + 2).min(self.max_gamma)
        } else {
            gamma.saturating_sub(1).max(1)
        }
    }

    /// Name for tables: the rule's (`sd`, `ssd`, `pcg`, `typical`), `+adaptive` when adaptive.
    pub fn name(&self) -> String {
        if self.adaptive {
            format!("{}+adaptive", self.rule.name())
        } else {
            self.rule.name().to_string()
        }
    }
}

/// Speculative decoding with a separate draft model `D` sharing the target's prompt type and
/// vocabulary.
#[derive(Debug)]
pub struct SpeculativeDecoder<D> {
    draft: D,
    config: SpeculativeConfig,
}

impl<D: LanguageModel> SpeculativeDecoder<D> {
    /// A decoder drafting with `draft`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] from [`SpeculativeConfig::validate`].
    pub fn new(draft: D, config: SpeculativeConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self { draft, config })
    }

    /// The draft model.
    pub fn draft(&self) -> &D {
        &self.draft
    }

    /// The settings.
    pub fn config(&self) -> &SpeculativeConfig {
        &self.config
    }
}

/// Checks what a speculative decoder needs beyond [`check_batch`]: no repetition-aware
/// resampling (its redraw is not a distribution the verifier can compare).
pub(crate) fn check_sampler(sampler: &SamplerConfig) -> Result<()> {
    if let Some(ras) = sampler.ras {
        return Err(InferError::InvalidSetting {
            name: "ras",
            value: format!("window {} ratio {}", ras.window, ras.ratio),
            expected: "off for speculative decoders (the redraw has no distribution to verify)"
                .into(),
        });
    }
    Ok(())
}

/// Per-sequence speculation state.
struct Lane {
    /// Emitted token not yet in the target cache.
    pending_t: u32,
    /// Emitted tokens not yet in the draft cache.
    pending_d: Vec<u32>,
    /// Current draft length.
    gamma: usize,
    /// Draft length of this step (capped by the tokens left, cut at a drafted EOS).
    step_gamma: usize,
    drafts: Vec<u32>,
    draft_probs: Vec<Vec<f32>>,
    draft_base: usize,
}

impl<M, D> Decoder<M> for SpeculativeDecoder<D>
where
    M: LanguageModel,
    D: LanguageModel<Prompt = M::Prompt>,
{
    fn name(&self) -> String {
        self.config.name()
    }

    fn generate(
        &mut self,
        model: &M,
        requests: &[Request<M::Prompt>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Generation>> {
        check_batch(requests, sampler)?;
        check_sampler(sampler)?;
        let draft = &self.draft;
        let config = &self.config;
        if draft.vocab_size() != model.vocab_size() {
            return Err(InferError::ModelMismatch {
                what: "vocabulary size",
                target: model.vocab_size().to_string(),
                draft: draft.vocab_size().to_string(),
            });
        }
        if draft.eos_token() != model.eos_token() {
            return Err(InferError::ModelMismatch {
                what: "end-of-sequence token",
                target: format!("{:?}", model.eos_token()),
                draft: format!("{:?}", draft.eos_token()),
            });
        }
        config.rule.validate(Some(model.vocab_size()))?;
        let next = LogitsRequest::next_token();
        let batch = requests.len();
        let mut sequences = Sequence::for_batch(requests, model.eos_token());
        let prompts: Vec<M::Prompt> = requests.iter().map(|r| r.prompt.clone()).collect();
        let mut target_cache = model.new_cache(batch, cache_capacity(model, requests, 1))?;
        let mut draft_cache = draft.new_cache(batch, cache_capacity(draft, requests, 1))?;
        let all = vec![true; batch];
        let first = timed_call(&mut sequences, &all, ModelCall::Target, || {
            model.prefill(&mut target_cache, &prompts, LogitsRequest::heads_at_last(1))
        })?;
        timed_call(&mut sequences, &all, ModelCall::Draft, || {
            draft.prefill(&mut draft_cache, &prompts, LogitsRequest::heads_at_last(1))
        })?;
        let mut lanes: Vec<Lane> = Vec::with_capacity(batch);
        for (b, seq) in sequences.iter_mut().enumerate() {
            let start = Instant::now();
            let probs = sampler.distribution(first.row(b, 0, 0), &seq.tokens, seq.banned(0));
            let token = sample(&probs, &mut seq.rng);
            seq.push(token);
            lanes.push(Lane {
                pending_t: token,
                pending_d: vec![token],
                gamma: config.gamma,
                step_gamma: 0,
                drafts: Vec::new(),
                draft_probs: Vec::new(),
                draft_base: 0,
            });
            seq.stats.decoder_time += start.elapsed();
        }

        while sequences.iter().any(Sequence::is_active) {
            // Draft phase: γ_b calls' worth of single-token extends (the first feeds pending_d).
            for (b, (seq, lane)) in sequences.iter().zip(lanes.iter_mut()).enumerate() {
                lane.drafts.clear();
                lane.draft_probs.clear();
                lane.step_gamma = if seq.is_active() {
                    lane.gamma.min(seq.remaining().saturating_sub(1))
                } else {
                    0
                };
                lane.draft_base = draft.cache_len(&draft_cache, b);
            }
            let longest = lanes.iter().map(|l| l.step_gamma).max().unwrap_or(0);
            for j in 0..longest {
                let blocks: Vec<Vec<u32>> = lanes
                    .iter()
                    .map(|lane| match j {
                        _ if j >= lane.step_gamma => Vec::new(),
                        0 => lane.pending_d.clone(),
                        _ => vec![lane.drafts[j - 1]],
                    })
                    .collect();
                let part: Vec<bool> = blocks.iter().map(|b| !b.is_empty()).collect();
                if !part.contains(&true) {
                    break;
                }
                let logits = timed_call(&mut sequences, &part, ModelCall::Draft, || {
                    draft.extend(&mut draft_cache, &blocks, next)
                })?;
                for (b, (seq, lane)) in sequences.iter_mut().zip(lanes.iter_mut()).enumerate() {
                    if !part[b] {
                        continue;
                    }
                    let start = Instant::now();
                    let row = logits.row(b, blocks[b].len() - 1, 0);
                    let history: Vec<u32> =
                        seq.tokens.iter().chain(&lane.drafts).copied().collect();
                    let probs = sampler.distribution(row, &history, seq.banned(j));
                    let token = sample(&probs, &mut seq.rng);
                    lane.drafts.push(token);
                    lane.draft_probs.push(probs);
                    if Some(token) == model.eos_token() {
                        lane.step_gamma = j + 1;
                    }
                    seq.stats.decoder_time += start.elapsed();
                }
            }

            // Target phase: one forward over [pending_t, drafts…] per active sequence.
            let proposals: Vec<Proposal<'_>> = lanes
                .iter()
                .map(|lane| Proposal {
                    pending: lane.pending_t,
                    drafts: &lane.drafts,
                    draft_probs: &lane.draft_probs,
                })
                .collect();
            let Some((_, verdicts)) = verify_phase(
                model,
                &mut target_cache,
                &mut sequences,
                &proposals,
                &config.rule,
                sampler,
                next,
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
                lane.pending_t = verdict.next;
                if gamma > 0 {
                    let in_draft = accepted.min(gamma - 1);
                    let keep = lane.draft_base + lane.pending_d.len() + in_draft;
                    draft.truncate(&mut draft_cache, b, keep)?;
                    lane.pending_d = lane.drafts[in_draft..accepted].to_vec();
                }
                // (γ = 0: the draft model sat this step out and its pending tokens stay.)
                lane.pending_d.push(verdict.next);
                lane.gamma = config.next_gamma(lane.gamma, gamma, accepted);
                seq.stats.decoder_time += start.elapsed();
            }
        }
        tracing::debug!(batch, decoder = %self.config.name(), "speculative decoding finished");
        Ok(sequences.into_iter().map(Sequence::finish).collect())
    }
}

/// The target's verification block `[pending, drafts…]`, leaving out a final drafted
/// end-of-sequence: EOS is never an input (the TTS models have no embedding for it), and the
/// position after it would only score a bonus token that an accepted EOS never emits.
pub(crate) fn verification_block(pending: u32, drafts: &[u32], eos: Option<u32>) -> Vec<u32> {
    let fed = match drafts.last() {
        Some(&last) if Some(last) == eos => &drafts[..drafts.len() - 1],
        _ => drafts,
    };
    std::iter::once(pending)
        .chain(fed.iter().copied())
        .collect()
}

/// What one sequence puts up for verification: the emitted token the target has not seen yet
/// and the drafts after it, with the distributions they were drawn from.
pub(crate) struct Proposal<'a> {
    pub pending: u32,
    pub drafts: &'a [u32],
    pub draft_probs: &'a [Vec<f32>],
}

/// The verification phase both speculative decoders share: one target forward over
/// `[pending, drafts…]` of every active sequence, the verdicts applied to the sequences, and
/// each target cache rolled back to the kept tokens. Returns `None` when no sequence is active,
/// else the logits of the forward (`[batch, positions, request.heads, vocab]`) and each
/// sequence's verdict (`None` for a sequence that sat out).
///
/// # Errors
/// The model's and the verifier's errors.
pub(crate) fn verify_phase<M: LanguageModel>(
    model: &M,
    cache: &mut M::Cache,
    sequences: &mut [Sequence],
    proposals: &[Proposal<'_>],
    rule: &AcceptanceRule,
    sampler: &SamplerConfig,
    request: LogitsRequest,
) -> Result<Option<(Logits, Vec<Option<Verdict>>)>> {
    let mut base = vec![0usize; sequences.len()];
    let blocks: Vec<Vec<u32>> = sequences
        .iter()
        .zip(proposals)
        .enumerate()
        .map(|(b, (seq, p))| {
            if seq.is_active() {
                base[b] = model.cache_len(cache, b);
                verification_block(p.pending, p.drafts, seq.eos())
            } else {
                Vec::new()
            }
        })
        .collect();
    let part: Vec<bool> = blocks.iter().map(|b| !b.is_empty()).collect();
    if !part.contains(&true) {
        return Ok(None);
    }
    let logits = timed_call(sequences, &part, ModelCall::Target, || {
        model.extend(cache, &blocks, request)
    })?;
    let mut verdicts = Vec::with_capacity(sequences.len());
    for (b, (seq, p)) in sequences.iter_mut().zip(proposals).enumerate() {
        if !part[b] {
            verdicts.push(None);
            continue;
        }
        let start = Instant::now();
        let verdict = verify_and_emit(rule, &logits, b, p.drafts, p.draft_probs, seq, sampler)?;
        // Roll back to the kept tokens (an accepted final EOS was never fed, and ends the
        // sequence).
        let keep = (base[b] + 1 + verdict.accepted).min(model.cache_len(cache, b));
        model.truncate(cache, b, keep)?;
        seq.stats.decoder_time += start.elapsed();
        verdicts.push(Some(verdict));
    }
    Ok(Some((logits, verdicts)))
}

/// Verifies sequence `b`'s drafts against the target's next-token logits of its block
/// (`[pending, drafts…]`: positions `0..=γ`, head 0) and applies the verdict to `seq`: the
/// counters, the accepted drafts and the next token (correction or bonus). Both speculative
/// decoders (draft model and self-speculation) share it.
///
/// # Errors
/// The verifier's errors (mismatched distributions, a draft token with zero draft probability).
pub(crate) fn verify_and_emit(
    rule: &AcceptanceRule,
    logits: &Logits,
    b: usize,
    drafts: &[u32],
    draft_probs: &[Vec<f32>],
    seq: &mut Sequence,
    sampler: &SamplerConfig,
) -> Result<Verdict> {
    let gamma = drafts.len();
    let mut history = seq.tokens.clone();
    let mut target_probs: Vec<Vec<f32>> = Vec::with_capacity(gamma + 1);
    // Position i scores the token after the first i drafts.
    let eos_last = gamma > 0 && Some(drafts[gamma - 1]) == seq.eos();
    for i in 0..=gamma {
        if i > 0 {
            history.push(drafts[i - 1]);
        }
        if eos_last && i == gamma {
            // Nothing follows an accepted EOS (see `verification_block`): the bonus slot repeats
            // the last distribution and its draw is discarded.
            let last = target_probs[gamma - 1].clone();
            target_probs.push(last);
            break;
        }
        target_probs.push(sampler.distribution(logits.row(b, i, 0), &history, seq.banned(i)));
    }
    let verdict = verify(rule, drafts, draft_probs, &target_probs, &mut seq.rng)?;
    seq.stats.drafted += gamma;
    seq.stats.accepted += verdict.accepted;
    seq.stats.thinning_trials += verdict.trials;
    for &x in &drafts[..verdict.accepted] {
        seq.push(x);
    }
    seq.push(verdict.next);
    Ok(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_gamma_grows_by_two_and_shrinks_by_one() {
        let config = SpeculativeConfig::new(2, AcceptanceRule::Exact).with_adaptive(5);
        assert_eq!(config.next_gamma(2, 2, 2), 4);
        assert_eq!(config.next_gamma(4, 4, 4), 5, "capped at max_gamma");
        assert_eq!(config.next_gamma(4, 4, 1), 3);
        assert_eq!(config.next_gamma(1, 1, 0), 1, "floor 1");
        // a step that drafted nothing (last token of a sequence) leaves γ alone
        assert_eq!(config.next_gamma(3, 0, 0), 3);
        let fixed = SpeculativeConfig::new(3, AcceptanceRule::Exact);
        assert_eq!(fixed.next_gamma(3, 3, 3), 3);
        assert_eq!(fixed.next_gamma(3, 3, 0), 3);
        assert_eq!(config.name(), "sd+adaptive");
    }

    #[test]
    fn settings_are_checked() {
        let err = SpeculativeConfig::new(0, AcceptanceRule::Exact)
            .validate()
            .unwrap_err();
        assert!(matches!(
            err,
            InferError::InvalidSetting { name: "gamma", .. }
        ));
        let err = SpeculativeConfig::new(4, AcceptanceRule::Exact)
            .with_adaptive(2)
            .validate()
            .unwrap_err();
        assert!(matches!(
            err,
            InferError::InvalidSetting {
                name: "max_gamma",
                ..
            }
        ));
        let err = SpeculativeConfig::new(
            2,
            AcceptanceRule::Typical {
                eps: 0.0,
                delta: 0.3,
            },
        )
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("eps"), "{err}");
    }
}
