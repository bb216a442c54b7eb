//! Decoders for delayed multi-stream LMs (SoCodec's multi-stream LM, MusicGen-style delay
//! patterns), independent of any backend.
//!
//! A [`FrameModel`] reads one column of `K` input ids per step and predicts the next column
//! with `K` heads. Frames `[K][T]` sit in a delayed grid of `1 + T + max_delay` steps: stream
//! `j` at step `s` holds frame `f = s − 1 − delay_j` when `0 ≤ f < T`, else the special token
//! `S` (the input id `codebook_size`, also the end-of-sequence class).
//!
//! ```text
//! step s, stream j, f = s − 1 − delay_j:
//!   f < 0, or f ≥ T once known (or ≥ max_frames)  → S            (forced)
//!   f < P (acoustic prompt)                       → prompt code  (forced, never overwritten)
//!   otherwise                                     → drawn from head j: stream 0 over the codes
//!                                                   and EOS (EOS fixes T = f), streams j > 0
//!                                                   over the codes only
//! stop: after step T + max_delay; frames reverted to [K][T], prompt first
//! ```
//!
//! Forced positions are never sampled nor scored. Every free position of a step is drawn from
//! `sampler.distribution(head_j, history_j, banned_j)`, independently across streams;
//! `history_j` is stream `j`'s codes generated so far (its own repetition penalty).
//!
//! - [`FrameArDecoder`]: one target forward per step.
//! - [`FrameSpeculativeDecoder`]: a draft [`FrameModel`] proposes `γ` columns, the target
//!   scores them in one forward, and any [`crate::AcceptanceRule`] verifies every stream of
//!   every drafted step independently.
//! - [`FrameMtpDecoder`]: a model with `n` heads per stream emits up to `n` columns per
//!   forward, drawn independently or chosen per stream by Viterbi.
//! - [`TableFrameLm`]: a deterministic toy model for tests.

mod ar;
mod layout;
mod model;
mod mtp;
mod speculative;
mod toy;

#[cfg(test)]
mod mtp_tests;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

pub use ar::FrameArDecoder;
pub use model::{FrameLogits, FrameModel, check_columns};
pub use mtp::FrameMtpDecoder;
pub use speculative::FrameSpeculativeDecoder;
pub use toy::{TableFrameCache, TableFrameLm, TableFrameLmConfig};

use crate::error::Result;
use crate::sampler::SamplerConfig;
use layout::Layout;

/// One utterance to decode.
#[derive(Debug, Clone)]
pub struct FrameRequest<P> {
    /// The conditioning (text, voice) handed to [`FrameModel::new_cache`] and
    /// [`FrameModel::prefill`].
    pub prompt: P,
    /// Acoustic prompt codes `[K][P]` continued by the decoder and copied into the output
    /// (empty: no prompt).
    pub codes: Vec<Vec<u32>>,
    /// Frames at most, prompt included (`> P`): reached when stream 0 never ends.
    pub max_frames: usize,
    /// Stream 0 may not end before this many frames (its end-of-sequence is banned below it).
    pub min_frames: usize,
    /// Seed of the utterance's random stream.
    pub seed: u64,
}

impl<P> FrameRequest<P> {
    /// No acoustic prompt, at most `max_frames` frames, at least 1, seeded with `seed`.
    pub fn new(prompt: P, max_frames: usize, seed: u64) -> Self {
        Self {
            prompt,
            codes: Vec::new(),
            max_frames,
            min_frames: 1,
            seed,
        }
    }

    /// Sets the acoustic prompt codes `[K][P]`.
    pub fn with_codes(mut self, codes: Vec<Vec<u32>>) -> Self {
        self.codes = codes;
        self
    }

    /// Sets `min_frames`.
    pub fn with_min_frames(mut self, min_frames: usize) -> Self {
        self.min_frames = min_frames;
        self
    }
}

/// Why decoding ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameStop {
    /// Stream 0 chose end-of-sequence.
    Eos,
    /// `max_frames` was reached.
    MaxFrames,
}

/// Counters of one utterance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrameStats {
    /// Forward calls of the target model (prefill included).
    pub target_forwards: usize,
    /// Forward calls of the draft model (prefill included), 0 without a draft.
    pub draft_forwards: usize,
    /// Steps decided after the prefilled ones (the columns generated).
    pub steps: usize,
    /// Frames generated (`T − P`).
    pub frames: usize,
    /// Per stream: free drafted positions verified.
    pub drafted: Vec<usize>,
    /// Per stream: drafted positions kept.
    pub accepted: Vec<usize>,
    /// Drafted steps (columns) put up for verification.
    pub drafted_steps: usize,
    /// Drafted steps kept whole (every stream accepted).
    pub accepted_steps: usize,
    /// Candidate draws of the PCG residual sampler.
    pub thinning_trials: usize,
    /// Wall time inside model calls.
    pub model_time: Duration,
}

impl FrameStats {
    fn new(streams: usize) -> Self {
        Self {
            drafted: vec![0; streams],
            accepted: vec![0; streams],
            ..Self::default()
        }
    }

    fn decode_forwards(&self) -> usize {
        self.target_forwards.saturating_sub(1)
    }

    /// Generated frames per target forward (prefill excluded); 0 when no forward ran.
    pub fn frames_per_target_forward(&self) -> f64 {
        match self.decode_forwards() {
            0 => 0.0,
            n => self.frames as f64 / n as f64,
        }
    }

    /// Generated steps per target forward (prefill excluded): 1 for AR up to the last step,
    /// which is never fed; 0 when no forward ran.
    pub fn steps_per_target_forward(&self) -> f64 {
        match self.decode_forwards() {
            0 => 0.0,
            n => self.steps as f64 / n as f64,
        }
    }

    /// Share of stream `j`'s drafted positions kept (`None` when it drafted none).
    pub fn acceptance_rate(&self, j: usize) -> Option<f64> {
        let drafted = *self.drafted.get(j)?;
        (drafted > 0).then(|| self.accepted[j] as f64 / drafted as f64)
    }

    /// Share of all drafted positions kept (`None` when none was drafted).
    pub fn overall_acceptance_rate(&self) -> Option<f64> {
        let drafted: usize = self.drafted.iter().sum();
        (drafted > 0).then(|| self.accepted.iter().sum::<usize>() as f64 / drafted as f64)
    }
}

/// The output of one utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameGeneration {
    /// Frames `[K][T]`, the acoustic prompt's `P` first.
    pub frames: Vec<Vec<u32>>,
    /// Every decided column of the delayed grid, step-major (`columns[s]` = the `K` ids of
    /// step `s`, from step 0); with equal delays it may end with a column of `S` past `T`.
    pub columns: Vec<Vec<u32>>,
    /// `P`.
    pub prompt_frames: usize,
    /// Why decoding ended.
    pub stop: FrameStop,
    /// Counters.
    pub stats: FrameStats,
}

/// A decoding strategy for a [`FrameModel`] `M`.
pub trait FrameDecoder<M: FrameModel> {
    /// Short name for tables and logs (`frame-ar`, `frame-sd`, ...).
    fn name(&self) -> String;

    /// Decodes one utterance.
    ///
    /// # Errors
    /// Invalid sampler settings or request (prompt shape, limits), a model whose streams,
    /// vocabulary or delays are unusable (or, for speculation, differ from the draft's), or a
    /// model error.
    fn generate(
        &self,
        model: &M,
        request: &FrameRequest<M::Prompt>,
        sampler: &SamplerConfig,
    ) -> Result<FrameGeneration>;
}

/// Runs a model call, adding its wall time to `time` and one to `calls`.
fn timed<T>(time: &mut Duration, calls: &mut usize, call: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let out = call()?;
    *time += start.elapsed();
    *calls += 1;
    Ok(out)
}

/// The generation from the decided `columns` and the end (`None`: `max_frames`).
fn finish(
    layout: &Layout,
    columns: Vec<Vec<u32>>,
    end: Option<usize>,
    known: usize,
    mut stats: FrameStats,
) -> Result<FrameGeneration> {
    let frames = layout.bound(end);
    stats.steps = columns.len().saturating_sub(known);
    stats.frames = frames.saturating_sub(layout.prompt_frames);
    Ok(FrameGeneration {
        frames: layout.revert(&columns, frames)?,
        columns,
        prompt_frames: layout.prompt_frames,
        stop: if end.is_some() {
            FrameStop::Eos
        } else {
            FrameStop::MaxFrames
        },
        stats,
    })
}
