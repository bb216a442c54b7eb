//! The decoder interface: every decoding strategy (AR, MTP with or without Viterbi,
//! speculative with any acceptance rule, self-speculative MTP) generates through it, so the CLI,
//! the synthesis pipeline and the benchmark treat them alike.

use std::time::Duration;

use crate::error::{InferError, Result};
use crate::lm::LanguageModel;
use crate::sampler::SamplerConfig;

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
