//! The delayed layout of one utterance: which positions are forced and which are free, when
//! decoding ends, and the reverted `[K][T]` frames.
//!
//! This mirrors `voxspec_data::DelayPattern` (`steps`, `frame_at`, `revert`), which this
//! crate cannot use (voxspec-data depends on Burn): stream `j` at step `s` holds frame
//! `f = s − 1 − delay_j` when `0 ≤ f < T`, else the special token `S`; a sequence of `T`
//! frames has `1 + T + max_delay` steps.

use super::FrameRequest;
use super::model::FrameModel;
use crate::error::{InferError, Result};

/// What a position of the delayed grid holds before anything is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Copied, never sampled nor scored: `S` (no frame, or a frame past the end) or a prompt
    /// code.
    Forced(u32),
    /// Drawn from the stream's head: the position holds this frame.
    Free {
        /// The frame index `f`.
        frame: usize,
    },
}

/// The per-utterance arithmetic of the delay pattern, the acoustic prompt and the limits.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    /// Streams `K`.
    pub streams: usize,
    /// Classes per head (`codebook_size + 1`).
    pub vocab: usize,
    /// `S`, also the end-of-sequence class.
    pub special: u32,
    delays: Vec<usize>,
    /// `[K][P]` (empty rows when there is no prompt).
    prompt: Vec<Vec<u32>>,
    /// `P`.
    pub prompt_frames: usize,
    /// Frames at most (prompt included).
    pub max_frames: usize,
    min_frames: usize,
}

impl Layout {
    /// Checks the model's streams, vocabulary and delays and the request's prompt and limits.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a model with no streams, fewer than 2 classes, a
    /// delay count other than `K`, decreasing delays or `special ≠ vocab − 1`;
    /// [`InferError::InvalidRequest`] for a prompt that is not `K` rows of one length of codes,
    /// `max_frames ≤ P` or `min_frames > max_frames`.
    pub fn new<M: FrameModel>(model: &M, request: &FrameRequest<M::Prompt>) -> Result<Self> {
        let (streams, vocab, special) = (model.streams(), model.vocab(), model.special());
        let delays = model.delays();
        let bad_model = |name, value: String, expected: String| {
            Err(InferError::InvalidSetting {
                name,
                value,
                expected,
            })
        };
        if streams == 0 {
            return bad_model("streams", "0".into(), "at least 1".into());
        }
        if vocab < 2 || vocab > u32::MAX as usize {
            return bad_model(
                "vocab",
                vocab.to_string(),
                "codebook_size + 1 with at least one code".into(),
            );
        }
        if special as usize != vocab - 1 {
            return bad_model(
                "special",
                special.to_string(),
                format!("the end-of-sequence class codebook_size = {}", vocab - 1),
            );
        }
        if delays.len() != streams || delays.windows(2).any(|w| w[1] < w[0]) {
            return bad_model(
                "delays",
                format!("{delays:?}"),
                format!("{streams} non-decreasing delays, one per stream"),
            );
        }
        let bad = |detail: String| Err(InferError::InvalidRequest { detail });
        let codes = &request.codes;
        let prompt_frames = codes.first().map_or(0, Vec::len);
        let prompt = if codes.is_empty() {
            vec![Vec::new(); streams]
        } else {
            if codes.len() != streams || codes.iter().any(|row| row.len() != prompt_frames) {
                return bad(format!(
                    "acoustic prompt of lengths {:?}; {streams} streams of one length expected",
                    codes.iter().map(Vec::len).collect::<Vec<_>>()
                ));
            }
            if let Some(&c) = codes.iter().flatten().find(|&&c| c >= special) {
                return bad(format!(
                    "acoustic prompt code {c} outside the codebook of {special}"
                ));
            }
            codes.clone()
        };
        if request.max_frames <= prompt_frames {
            return bad(format!(
                "max_frames {} leaves nothing to generate after a prompt of {prompt_frames} frames",
                request.max_frames
            ));
        }
        if request.min_frames > request.max_frames {
            return bad(format!(
                "min_frames {} above max_frames {}",
                request.min_frames, request.max_frames
            ));
        }
        Ok(Self {
            streams,
            vocab,
            special,
            delays,
            prompt,
            prompt_frames,
            max_frames: request.max_frames,
            min_frames: request.min_frames,
        })
    }

    fn max_delay(&self) -> usize {
        self.delays.last().copied().unwrap_or(0)
    }

    /// Steps of a sequence of `frames` frames: `1 + frames + max_delay`.
    pub fn steps(&self, frames: usize) -> usize {
        1 + frames + self.max_delay()
    }

    /// The frame bound: `T` once stream 0 has ended, else `max_frames`.
    pub fn bound(&self, end: Option<usize>) -> usize {
        end.unwrap_or(self.max_frames)
    }

    /// Whether `decided` leading columns complete the sequence.
    pub fn done(&self, decided: usize, end: Option<usize>) -> bool {
        decided >= self.steps(self.bound(end))
    }

    /// What stream `j` holds at `step` given the end known so far.
    pub fn slot(&self, j: usize, step: usize, end: Option<usize>) -> Slot {
        match step.checked_sub(1 + self.delays[j]) {
            None => Slot::Forced(self.special),
            Some(f) if f >= self.bound(end) => Slot::Forced(self.special),
            Some(f) if f < self.prompt_frames => Slot::Forced(self.prompt[j][f]),
            Some(frame) => Slot::Free { frame },
        }
    }

    /// The class banned at a free position: end-of-sequence for every stream but 0, and for
    /// stream 0 below `min_frames`.
    pub fn banned(&self, j: usize, frame: usize) -> Option<u32> {
        (j > 0 || frame < self.min_frames).then_some(self.special)
    }

    /// The leading columns that hold only `S` and prompt codes: steps `0..=P + delay_0`.
    pub fn known_columns(&self) -> Vec<Vec<u32>> {
        let known = self.prompt_frames + self.delays[0] + 1;
        (0..known)
            .map(|step| {
                (0..self.streams)
                    .map(|j| match self.slot(j, step, None) {
                        Slot::Forced(id) => id,
                        // unreachable for step ≤ P + delay_0 ≤ P + delay_j
                        Slot::Free { .. } => self.special,
                    })
                    .collect()
            })
            .collect()
    }

    /// The column of `step` from `raw` (per stream: the forced id, or the token drawn, where
    /// stream 0 may have drawn end-of-sequence): stream 0's end-of-sequence fixes `T` (in
    /// `end`), after which every position past `T` of this step holds `S`.
    pub fn finish_column(&self, step: usize, raw: &[u32], end: &mut Option<usize>) -> Vec<u32> {
        if let Slot::Free { frame } = self.slot(0, step, *end)
            && raw[0] == self.special
        {
            *end = Some(frame);
        }
        (0..self.streams)
            .map(|j| match self.slot(j, step, *end) {
                Slot::Forced(id) => id,
                Slot::Free { .. } => raw[j],
            })
            .collect()
    }

    /// Appends the codes `column` emitted at free positions to each stream's history (what
    /// the repetition penalty looks at).
    pub fn record(
        &self,
        step: usize,
        column: &[u32],
        end: Option<usize>,
        history: &mut [Vec<u32>],
    ) {
        for (j, h) in history.iter_mut().enumerate() {
            if let Slot::Free { .. } = self.slot(j, step, end) {
                h.push(column[j]);
            }
        }
    }

    /// The frames `[K][T]` (prompt first) of the decided `columns`.
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] when the columns do not cover `T` frames.
    pub fn revert(&self, columns: &[Vec<u32>], frames: usize) -> Result<Vec<Vec<u32>>> {
        (0..self.streams)
            .map(|j| {
                (0..frames)
                    .map(|f| {
                        columns
                            .get(1 + f + self.delays[j])
                            .and_then(|column| column.get(j))
                            .copied()
                            .ok_or_else(|| InferError::InvalidRequest {
                                detail: format!(
                                    "{} decided steps do not hold frame {f} of stream {j}",
                                    columns.len()
                                ),
                            })
                    })
                    .collect()
            })
            .collect()
    }
}
