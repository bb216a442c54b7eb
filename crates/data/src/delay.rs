//! The delay pattern of multi-stream codec LMs (MusicGen / audiocraft's `DelayedPatternProvider`,
//! SoCodec's multi-stream LM): stream `j` is shifted right by `delay_j` steps, so one LM step
//! predicts frame `t` of stream 0 together with frame `t − delay_j` of stream `j`, and a later
//! stream always sees the earlier streams of its own frame.
//!
//! ```text
//! delays d·j (stream j = 0..K), frames T, steps 1 + T + max_delay:
//!   step 0:        S in every stream (the empty first step)
//!   step s ≥ 1:    stream j holds frame s − 1 − delay_j when 0 ≤ s − 1 − delay_j < T, else S
//! K = 3, d = 1, T = 3:   stream 0  S a0 a1 a2 S  S
//!                        stream 1  S S  b0 b1 b2 S
//!                        stream 2  S S  S  c0 c1 c2
//! ```
//!
//! `S` is the special token (the codebook size, so input embeddings have `card + 1` rows).
//! Positions that hold `S` are never generated and never scored ([`DelayPattern::is_valid`]).
//! [`UNGENERATED`] marks, in a partly generated sequence, valid positions not produced yet;
//! [`DelayPattern::revert`] refuses to return either as a code, so misuse is an error and not
//! silent garbage. Pure index arithmetic: no tensors.

use crate::error::{DataError, Result};

/// Sentinel of a valid position that has not been generated yet.
pub const UNGENERATED: u32 = u32::MAX;

/// A delay per stream and the special token (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayPattern {
    delays: Vec<usize>,
    special: u32,
}

impl DelayPattern {
    /// Delays `d · j` for stream `j` of `streams` (`d = 0`: the no-delay ablation), special
    /// token `special` (the codebook size).
    ///
    /// # Errors
    /// [`DataError::Config`] for no streams or a special token equal to [`UNGENERATED`].
    pub fn uniform(streams: usize, d: usize, special: u32) -> Result<Self> {
        Self::new((0..streams).map(|j| d * j).collect(), special)
    }

    /// Explicit delays, one per stream, non-decreasing (as audiocraft requires).
    ///
    /// # Errors
    /// [`DataError::Config`] for no streams, decreasing delays, or a special token equal to
    /// [`UNGENERATED`].
    pub fn new(delays: Vec<usize>, special: u32) -> Result<Self> {
        let bad = |detail: String| DataError::Config {
            field: "delay pattern",
            detail,
        };
        if delays.is_empty() {
            return Err(bad("no streams".into()));
        }
        if delays.windows(2).any(|w| w[1] < w[0]) {
            return Err(bad(format!("delays {delays:?} must not decrease")));
        }
        if special == UNGENERATED {
            return Err(bad(
                "the special token cannot be the UNGENERATED sentinel".into()
            ));
        }
        Ok(Self { delays, special })
    }

    /// Number of streams `K`.
    pub fn streams(&self) -> usize {
        self.delays.len()
    }

    /// The delay of each stream.
    pub fn delays(&self) -> &[usize] {
        &self.delays
    }

    /// The special token `S`.
    pub fn special(&self) -> u32 {
        self.special
    }

    /// The largest delay.
    pub fn max_delay(&self) -> usize {
        self.delays.last().copied().unwrap_or(0)
    }

    /// Steps of the delayed sequence of `frames` frames: `1 + frames + max_delay`.
    pub fn steps(&self, frames: usize) -> usize {
        1 + frames + self.max_delay()
    }

    /// Frames of a delayed sequence of `steps` steps (`None` when too short to be one).
    pub fn frames(&self, steps: usize) -> Option<usize> {
        steps.checked_sub(1 + self.max_delay())
    }

    /// The step at which stream `stream` holds frame `frame`.
    pub fn step_of(&self, stream: usize, frame: usize) -> usize {
        1 + frame + self.delays[stream]
    }

    /// The frame stream `stream` holds at `step`, if any, in a sequence of `frames` frames.
    pub fn frame_at(&self, stream: usize, step: usize, frames: usize) -> Option<usize> {
        let frame = step.checked_sub(1 + self.delays.get(stream)?)?;
        (frame < frames).then_some(frame)
    }

    /// Whether stream `stream` at `step` holds a frame (is generated and scored).
    pub fn is_valid(&self, stream: usize, step: usize, frames: usize) -> bool {
        self.frame_at(stream, step, frames).is_some()
    }

    /// The delayed layout `[K][1 + T + max_delay]` of `codes` (`[K][T]`, every stream `T`
    /// frames), `S` at every invalid position.
    ///
    /// # Errors
    /// [`DataError::Config`] when the streams are not `K` of equal length, or a code is `S` or
    /// [`UNGENERATED`].
    pub fn build(&self, codes: &[Vec<u32>]) -> Result<Vec<Vec<u32>>> {
        let frames = self.check_streams(codes.iter().map(Vec::len), "codes")?;
        if let Some((j, t)) = codes.iter().enumerate().find_map(|(j, s)| {
            s.iter()
                .position(|&c| c == self.special || c == UNGENERATED)
                .map(|t| (j, t))
        }) {
            return Err(DataError::Config {
                field: "codes",
                detail: format!(
                    "stream {j} frame {t} holds {}, the special token or the UNGENERATED sentinel",
                    codes[j][t]
                ),
            });
        }
        let steps = self.steps(frames);
        Ok(codes
            .iter()
            .zip(&self.delays)
            .map(|(stream, &delay)| {
                let mut row = vec![self.special; steps];
                row[1 + delay..1 + delay + frames].copy_from_slice(stream);
                row
            })
            .collect())
    }

    /// The codes `[K][T]` of a delayed layout `[K][steps]` (`T = steps − 1 − max_delay`): the
    /// inverse of [`build`](Self::build).
    ///
    /// # Errors
    /// [`DataError::Config`] when the rows are not `K` of equal length at least
    /// `1 + max_delay`, or a valid position holds `S` or [`UNGENERATED`] (not generated yet).
    pub fn revert(&self, delayed: &[Vec<u32>]) -> Result<Vec<Vec<u32>>> {
        let steps = self.check_streams(delayed.iter().map(Vec::len), "delayed codes")?;
        let frames = self.frames(steps).ok_or_else(|| DataError::Config {
            field: "delayed codes",
            detail: format!(
                "{steps} steps are fewer than the {} of an empty sequence",
                1 + self.max_delay()
            ),
        })?;
        delayed
            .iter()
            .zip(&self.delays)
            .enumerate()
            .map(|(j, (row, &delay))| {
                let codes = &row[1 + delay..1 + delay + frames];
                match codes
                    .iter()
                    .position(|&c| c == self.special || c == UNGENERATED)
                {
                    Some(t) => Err(DataError::Config {
                        field: "delayed codes",
                        detail: format!(
                            "stream {j} frame {t} (step {}) holds {}: {}",
                            1 + delay + t,
                            codes[t],
                            if codes[t] == UNGENERATED {
                                "not generated yet"
                            } else {
                                "the special token at a valid position"
                            }
                        ),
                    }),
                    None => Ok(codes.to_vec()),
                }
            })
            .collect()
    }

    /// Checks `K` rows of one length and returns it.
    fn check_streams(
        &self,
        lens: impl Iterator<Item = usize>,
        what: &'static str,
    ) -> Result<usize> {
        let lens: Vec<usize> = lens.collect();
        if lens.len() != self.streams() || lens.windows(2).any(|w| w[0] != w[1]) {
            return Err(DataError::Config {
                field: what,
                detail: format!(
                    "expected {} streams of one length, got lengths {lens:?}",
                    self.streams()
                ),
            });
        }
        Ok(lens.first().copied().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example() {
        let p = DelayPattern::uniform(3, 1, 9).unwrap();
        let codes = vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
        let d = p.build(&codes).unwrap();
        assert_eq!(
            d,
            vec![
                vec![9, 0, 1, 2, 9, 9],
                vec![9, 9, 3, 4, 5, 9],
                vec![9, 9, 9, 6, 7, 8]
            ]
        );
        assert_eq!(p.revert(&d).unwrap(), codes);
        assert!(p.is_valid(1, 2, 3) && !p.is_valid(1, 1, 3) && !p.is_valid(0, 0, 3));
        assert_eq!(p.frame_at(2, 5, 3), Some(2));
        assert_eq!(p.step_of(2, 2), 5);
    }

    #[test]
    fn misuse_is_an_error() {
        let p = DelayPattern::uniform(2, 1, 4).unwrap();
        let mut d = p.build(&[vec![0, 1], vec![2, 3]]).unwrap();
        d[1][2] = UNGENERATED;
        let err = p.revert(&d).unwrap_err().to_string();
        assert!(err.contains("not generated yet"), "{err}");
        d[1][2] = 4;
        let err = p.revert(&d).unwrap_err().to_string();
        assert!(err.contains("special token"), "{err}");
        assert!(p.build(&[vec![0], vec![1, 2]]).is_err());
        assert!(
            p.build(&[vec![4], vec![1]]).is_err(),
            "the special token as a code"
        );
        assert!(
            p.revert(&[vec![4], vec![4]]).is_err(),
            "shorter than an empty sequence"
        );
        assert!(DelayPattern::new(vec![1, 0], 4).is_err());
        assert!(DelayPattern::new(vec![], 4).is_err());
    }
}
