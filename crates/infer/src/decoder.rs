//! The decoder interface: every decoding strategy (AR, MTP with or without Viterbi,
//! speculative with any acceptance rule, self-speculative MTP) generates through it, so the CLI,
//! the synthesis pipeline and the benchmark treat them alike.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;

use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, Logits};
use crate::sampler::{SamplerConfig, seeded_rng};

/// How long a generation may run. TTS callers bound these by the text length (CosyVoice uses
/// 2x and 20x the text tokens as minimum and maximum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// End-of-sequence is not accepted before this many tokens (it is masked out).
    pub min_tokens: usize,
    /// Generation stops after this many tokens.
    pub max_tokens: usize,
}

impl Limits {
    /// At most `max_tokens`, no minimum.
    pub fn max(max_tokens: usize) -> Self {
        Self {
            min_tokens: 0,
            max_tokens,
        }
    }

    /// Bounds proportional to the text length, as CosyVoice does (ratios 2 and 20 there):
    /// `min = floor(text_len · min_ratio)`, `max = max(ceil(text_len · max_ratio), min, 1)`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a negative or non-finite ratio, or
    /// `min_ratio > max_ratio`.
    pub fn for_text(text_len: usize, min_ratio: f32, max_ratio: f32) -> Result<Self> {
        if !(min_ratio.is_finite() && max_ratio.is_finite() && min_ratio >= 0.0)
            || min_ratio > max_ratio
        {
            return Err(InferError::InvalidSetting {
                name: "min_ratio/max_ratio",
                value: format!("{min_ratio} / {max_ratio}"),
                expected: "finite, 0 <= min_ratio <= max_ratio".into(),
            });
        }
        let min_tokens = (text_len as f64 * f64::from(min_ratio)).floor() as usize;
        let max_tokens = ((text_len as f64 * f64::from(max_ratio)).ceil() as usize)
            .max(min_tokens)
            .max(1);
        Ok(Self {
            min_tokens,
            max_tokens,
        })
    }

    /// Checks `min_tokens ≤ max_tokens` and `max_tokens ≥ 1`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the bound at fault.
    pub fn validate(&self) -> Result<()> {
        if self.max_tokens == 0 {
            return Err(InferError::InvalidSetting {
                name: "max_tokens",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        if self.min_tokens > self.max_tokens {
            return Err(InferError::InvalidSetting {
                name: "min_tokens",
                value: self.min_tokens.to_string(),
                expected: format!("at most max_tokens = {}", self.max_tokens),
            });
        }
        Ok(())
    }
}

/// One sequence to generate.
#[derive(Debug, Clone)]
pub struct Request<P> {
    /// What the model is conditioned on.
    pub prompt: P,
    /// Length bounds.
    pub limits: Limits,
    /// Seed of this sequence's random stream: the same request gives the same tokens whether it
    /// is decoded alone or in a batch.
    pub seed: u64,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model emitted end-of-sequence (not included in the tokens).
    Eos,
    /// `max_tokens` was reached.
    MaxTokens,
}

/// Counters of one generation. Ratios (tokens per forward, acceptance rate) derive from them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodeStats {
    /// Forward calls of the target model (prefill included).
    pub target_forwards: usize,
    /// Forward calls of the draft model (prefill included), 0 without a draft.
    pub draft_forwards: usize,
    /// Tokens proposed for verification (drafted or from MTP heads).
    pub drafted: usize,
    /// Proposed tokens accepted.
    pub accepted: usize,
    /// Candidate draws of the residual (thinning) sampler, PCG only.
    pub thinning_trials: usize,
    /// Wall time inside model calls.
    pub model_time: Duration,
    /// Wall time in the decoder's own work (sampling, Viterbi, verification).
    pub decoder_time: Duration,
}

impl DecodeStats {
    /// Fraction of proposed tokens accepted (`None` when nothing was proposed).
    pub fn acceptance_rate(&self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }

    /// Adds another generation's counters (for totals over a test set).
    pub fn merge(&mut self, other: &DecodeStats) {
        self.target_forwards += other.target_forwards;
        self.draft_forwards += other.draft_forwards;
        self.drafted += other.drafted;
        self.accepted += other.accepted;
        self.thinning_trials += other.thinning_trials;
        self.model_time += other.model_time;
        self.decoder_time += other.decoder_time;
    }
}

/// The output of one sequence.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// Generated tokens, end-of-sequence excluded.
    pub tokens: Vec<u32>,
    /// Why generation ended.
    pub stop: StopReason,
    /// Counters. In a batch, forward counts are those of the batched calls this sequence took
    /// part in.
    pub stats: DecodeStats,
}

impl Generation {
    /// Tokens emitted per target forward (prefill excluded); 0 when no forward ran.
    pub fn tokens_per_forward(&self) -> f64 {
        let forwards = self.stats.target_forwards.saturating_sub(1);
        if forwards == 0 {
            0.0
        } else {
            self.tokens.len() as f64 / forwards as f64
        }
    }
}

/// A decoding strategy over a target model `M`. Decoders that need more (a draft model,
/// transition statistics, similarity groups) hold it themselves.
pub trait Decoder<M: LanguageModel> {
    /// Short name for tables and logs (`ar`, `mtp-viterbi`, `sd`, `ssd`, `pcg`, ...).
    fn name(&self) -> String;

    /// Generates every request as one batch. Each sequence's result equals decoding it alone
    /// with the same seed.
    ///
    /// # Errors
    /// Invalid limits, an empty batch, or a model error.
    fn generate(
        &mut self,
        model: &M,
        requests: &[Request<M::Prompt>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Generation>>;
}

/// Checks a batch before decoding: at least one request, valid limits and sampler settings.
///
/// # Errors
/// [`InferError::InvalidRequest`] for an empty batch (or a bad request, naming its index);
/// [`InferError::InvalidSetting`] for the sampler.
pub fn check_batch<P>(requests: &[Request<P>], sampler: &SamplerConfig) -> Result<()> {
    if requests.is_empty() {
        return Err(InferError::InvalidRequest {
            detail: "empty batch: no request to generate".into(),
        });
    }
    sampler.validate()?;
    for (b, request) in requests.iter().enumerate() {
        request
            .limits
            .validate()
            .map_err(|e| InferError::InvalidRequest {
                detail: format!("request {b}: {e}"),
            })?;
    }
    Ok(())
}

/// Cache capacity a batch needs: the longest `prompt + max_tokens`, plus `lookahead`
/// positions a decoder may write past the last kept token (speculation).
pub fn cache_capacity<M: LanguageModel>(
    model: &M,
    requests: &[Request<M::Prompt>],
    lookahead: usize,
) -> usize {
    requests
        .iter()
        .map(|r| model.prompt_len(&r.prompt) + r.limits.max_tokens + lookahead)
        .max()
        .unwrap_or(lookahead)
}

/// Decoding state of one sequence of a batch: its tokens, its own random stream, its counters
/// and whether it has stopped. Decoders keep one per request so that a batch decodes each
/// sequence exactly as it would alone.
#[derive(Debug, Clone)]
pub struct Sequence {
    /// Tokens generated so far (end-of-sequence excluded).
    pub tokens: Vec<u32>,
    /// This sequence's random stream (`seeded_rng(request.seed)`).
    pub rng: StdRng,
    /// Counters so far.
    pub stats: DecodeStats,
    /// `Some` once the sequence has ended.
    pub stop: Option<StopReason>,
    limits: Limits,
    eos: Option<u32>,
}

impl Sequence {
    /// A fresh sequence for `request` of a model whose end-of-sequence token is `eos`.
    pub fn new<P>(request: &Request<P>, eos: Option<u32>) -> Self {
        Self {
            tokens: Vec::with_capacity(request.limits.max_tokens),
            rng: seeded_rng(request.seed),
            stats: DecodeStats::default(),
            stop: None,
            limits: request.limits,
            eos,
        }
    }

    /// One [`Sequence`] per request.
    pub fn for_batch<P>(requests: &[Request<P>], eos: Option<u32>) -> Vec<Self> {
        requests.iter().map(|r| Self::new(r, eos)).collect()
    }

    /// The end-of-sequence token, if the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether the sequence is still generating.
    pub fn is_active(&self) -> bool {
        self.stop.is_none()
    }

    /// Tokens it may still emit before `max_tokens`.
    pub fn remaining(&self) -> usize {
        self.limits.max_tokens.saturating_sub(self.tokens.len())
    }

    /// The token banned `ahead` positions after the current end: end-of-sequence while the
    /// sequence would still be shorter than `min_tokens`.
    pub fn banned(&self, ahead: usize) -> Option<u32> {
        self.eos
            .filter(|_| self.tokens.len() + ahead < self.limits.min_tokens)
    }

    /// Appends a token: end-of-sequence stops the sequence (and is not kept), as does reaching
    /// `max_tokens`. Returns whether the token was kept; pushing onto a stopped sequence keeps
    /// nothing.
    pub fn push(&mut self, token: u32) -> bool {
        if self.stop.is_some() {
            return false;
        }
        if Some(token) == self.eos {
            self.stop = Some(StopReason::Eos);
            return false;
        }
        self.tokens.push(token);
        if self.tokens.len() >= self.limits.max_tokens {
            self.stop = Some(StopReason::MaxTokens);
        }
        true
    }

    /// Records a model call this sequence took part in.
    pub fn count_call(&mut self, model: ModelCall, elapsed: Duration) {
        match model {
            ModelCall::Target => self.stats.target_forwards += 1,
            ModelCall::Draft => self.stats.draft_forwards += 1,
        }
        self.stats.model_time += elapsed;
    }

    /// The finished generation (a sequence still active reports `MaxTokens`).
    pub fn finish(self) -> Generation {
        Generation {
            tokens: self.tokens,
            stop: self.stop.unwrap_or(StopReason::MaxTokens),
            stats: self.stats,
        }
    }
}

/// Which model a timed call ran: the counters of [`DecodeStats`] keep them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelCall {
    /// The model whose distribution is sampled (verification included).
    Target,
    /// A speculative decoder's draft model.
    Draft,
}

/// Runs `call` (a call of `model`) and charges its wall time to every sequence for which
/// `takes_part` is true, counting it as a target or draft forward.
///
/// # Errors
/// Whatever `call` returns.
pub fn timed_call<F>(
    sequences: &mut [Sequence],
    takes_part: &[bool],
    model: ModelCall,
    call: F,
) -> Result<Logits>
where
    F: FnOnce() -> Result<Logits>,
{
    let start = Instant::now();
    let logits = call()?;
    let elapsed = start.elapsed();
    for (seq, _) in sequences
        .iter_mut()
        .zip(takes_part)
        .filter(|(_, part)| **part)
    {
        seq.count_call(model, elapsed);
    }
    Ok(logits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_follow_the_text_length() {
        let l = Limits::for_text(7, 2.0, 20.0).unwrap();
        assert_eq!((l.min_tokens, l.max_tokens), (14, 140));
        assert!(l.validate().is_ok());
        let empty = Limits::for_text(0, 2.0, 20.0).unwrap();
        assert_eq!((empty.min_tokens, empty.max_tokens), (0, 1));
        assert!(Limits::for_text(5, 3.0, 2.0).is_err());
        assert!(Limits::for_text(5, -1.0, 2.0).is_err());
    }

    #[test]
    fn sequences_stop_at_eos_and_max() {
        let request = Request {
            prompt: (),
            limits: Limits {
                min_tokens: 2,
                max_tokens: 3,
            },
            seed: 0,
        };
        let mut seq = Sequence::new(&request, Some(9));
        assert_eq!(
            (seq.banned(0), seq.banned(1), seq.banned(2)),
            (Some(9), Some(9), None)
        );
        assert!(seq.push(4) && seq.push(5));
        assert_eq!(seq.remaining(), 1);
        assert!(!seq.push(9));
        assert_eq!(seq.stop, Some(StopReason::Eos));
        assert!(!seq.push(1));
        let mut seq = Sequence::new(&request, Some(9));
        assert!(seq.push(1) && seq.push(2) && seq.push(3));
        assert_eq!(seq.stop, Some(StopReason::MaxTokens));
        assert_eq!(seq.finish().tokens, vec![1, 2, 3]);
    }
}
