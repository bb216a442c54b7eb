//! [`FrameMtpDecoder`]: multi-token prediction over the delayed grid. A model with `n` heads
//! per stream reads, after the last step held, the logits of the next `n` steps; the decoder
//! emits up to `n` columns from them and feeds the block back in one forward.
//!
//! ```text
//! after column s−1:  head i, stream j → logits of position (s + i, j),  i = 0 … n−1
//! independent:       columns s … s+n−1 in order; each free position drawn from its head's row
//!                    (the sampler's warping; history = the stream's codes so far, the block's
//!                    earlier ones included); forced positions copied; stream 0's EOS fixes T
//! Viterbi:           per stream, over its free positions of the block: top-k candidates per
//!                    head, that stream's own transition matrix Q_j, best path (as
//!                    [`crate::MtpDecoder`]); stream 0 first (its EOS ends its path and fixes T),
//!                    then streams j > 0 over the positions still free given T
//! feed:              extend(the emitted columns) → the heads after the block
//! stop:              as [`super::FrameArDecoder`]: after step T + max_delay or max_frames
//! ```
//!
//! One transition matrix per stream: the streams of an OPQ codec quantise disjoint
//! sub-spaces, so each has its own codebook and its own code-to-code statistics; within a
//! step the streams are drawn independently given the prefix (as by the heads), and a path
//! search per stream keeps that. A stream's path never crosses into another stream.
//!
//! With one head, independent MTP is [`super::FrameArDecoder`] exactly (greedy or sampled),
//! and greedy Viterbi without `link_previous` is too (a one-position path is the head's
//! argmax).
//!
//! # Statistics
//! `drafted_steps` counts the columns proposed by heads `1..` and `accepted_steps` those
//! emitted (fewer only where the sequence ended inside a block); per stream, `drafted` and
//! `accepted` count the free positions of those columns. `frames_per_target_forward` is the
//! figure of merit.

use std::sync::Arc;
use std::time::Instant;

use super::layout::{Layout, Slot};
use super::model::{FrameLogits, FrameModel};
use super::{FrameDecoder, FrameGeneration, FrameRequest, FrameStats, finish, timed};
use crate::error::{InferError, Result};
use crate::mtp::PathSelection;
use crate::sampler::{SamplerConfig, seeded_rng};
use crate::transitions::Transitions;
use crate::viterbi::ViterbiConfig;

/// Multi-token prediction over frames: `heads` steps per forward, each position drawn from its
/// own head, or each stream's block chosen by Viterbi over its own transition matrix.
#[derive(Debug, Clone)]
pub struct FrameMtpDecoder {
    heads: usize,
    viterbi: Option<(ViterbiConfig, Vec<Arc<Transitions>>)>,
}

impl FrameMtpDecoder {
    /// `heads` steps per forward, every position drawn from its head on its own.
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

    /// `heads` steps per forward, stream `j`'s block chosen by Viterbi over `transitions[j]`
    /// (one matrix per stream, over the model's classes: the codes and end-of-sequence).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when `heads = 0`, `config.top_k = 0` or no matrix is
    /// given (the count and vocabulary are checked against the model in `generate`).
    pub fn with_viterbi(
        heads: usize,
        config: ViterbiConfig,
        transitions: Vec<Arc<Transitions>>,
    ) -> Result<Self> {
        config.validate()?;
        if transitions.is_empty() {
            return Err(InferError::InvalidSetting {
                name: "transitions",
                value: "none".into(),
                expected: "one transition matrix per stream".into(),
            });
        }
        let mut decoder = Self::new(heads)?;
        decoder.viterbi = Some((config, transitions));
        Ok(decoder)
    }

    /// Steps per forward.
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The Viterbi settings, if path selection is on.
    pub fn viterbi(&self) -> Option<ViterbiConfig> {
        self.viterbi.as_ref().map(|(config, _)| *config)
    }

    /// One path selection per stream, checked against the layout.
    fn selections(&self, layout: &Layout) -> Result<Option<Vec<PathSelection>>> {
        let Some((config, transitions)) = &self.viterbi else {
            return Ok(None);
        };
        if transitions.len() != layout.streams {
            return Err(InferError::InvalidSetting {
                name: "transitions",
                value: format!("{} matrices", transitions.len()),
                expected: format!("one per stream of the model ({})", layout.streams),
            });
        }
        transitions
            .iter()
            .enumerate()
            .map(|(j, q)| {
                let selection = PathSelection::new(*config, Arc::clone(q))?;
                if selection.vocab() != layout.vocab {
                    return Err(InferError::InvalidSetting {
                        name: "transitions",
                        value: format!("stream {j}: {} classes", selection.vocab()),
                        expected: format!("the model's {} classes per head", layout.vocab),
                    });
                }
                Ok(selection)
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }
}

/// The raw ids of the block's `n` columns chosen by Viterbi, stream by stream (stream 0 first:
/// its end-of-sequence fixes the end the other streams' free positions depend on).
#[allow(clippy::too_many_arguments)]
fn viterbi_block(
    selections: &mut [PathSelection],
    layout: &Layout,
    heads: &FrameLogits,
    first_step: usize,
    end: Option<usize>,
    history: &[Vec<u32>],
    sampler: &SamplerConfig,
    rng: &mut rand::rngs::StdRng,
) -> Result<Vec<Vec<u32>>> {
    let n = heads.steps();
    let mut block = vec![vec![layout.special; layout.streams]; n];
    let mut end = end;
    for (j, selection) in selections.iter_mut().enumerate() {
        let free: Vec<(usize, usize)> = (0..n)
            .filter_map(|i| match layout.slot(j, first_step + i, end) {
                Slot::Free { frame } => Some((i, frame)),
                Slot::Forced(_) => None,
            })
            .collect();
        if free.is_empty() {
            continue;
        }
        let rows: Vec<&[f32]> = free.iter().map(|&(i, _)| heads.row(i, j)).collect();
        let banned: Vec<Option<u32>> = free.iter().map(|&(_, f)| layout.banned(j, f)).collect();
        let eos = (j == 0).then_some(layout.special);
        let path = selection.select(&rows, &banned, &history[j], eos, sampler, rng)?;
        for (&(i, frame), &t) in free.iter().zip(&path) {
            block[i][j] = t;
            if j == 0 && t == layout.special && end.is_none() {
                end = Some(frame);
            }
        }
    }
    Ok(block)
}

impl<M: FrameModel> FrameDecoder<M> for FrameMtpDecoder {
    fn name(&self) -> String {
        match self.viterbi {
            Some(_) => "frame-mtp-viterbi".into(),
            None => "frame-mtp".into(),
        }
    }

    fn generate(
        &self,
        model: &M,
        request: &FrameRequest<M::Prompt>,
        sampler: &SamplerConfig,
    ) -> Result<FrameGeneration> {
        sampler.validate()?;
        if self.heads > model.heads() {
            return Err(InferError::InvalidSetting {
                name: "heads",
                value: self.heads.to_string(),
                expected: format!("at most the model's {} heads", model.heads()),
            });
        }
        let layout = Layout::new(model, request)?;
        let mut selections = self.selections(&layout)?;
        let (k, vocab, n) = (layout.streams, layout.vocab, self.heads);
        let mut stats = FrameStats::new(k);
        let mut rng = seeded_rng(request.seed);
        let mut cache = model.new_cache(&request.prompt, layout.steps(layout.max_frames))?;
        let mut columns = layout.known_columns();
        let known = columns.len();
        timed(&mut stats.model_time, &mut stats.target_forwards, || {
            model.prefill(&mut cache, &request.prompt, &columns)
        })?
        .check(1, k, vocab)?;
        let read_heads = |cache: &M::Cache, stats: &mut FrameStats| -> Result<FrameLogits> {
            let start = Instant::now();
            let logits = model.head_logits(cache, n)?;
            stats.model_time += start.elapsed();
            logits.check(n, k, vocab)?;
            Ok(logits)
        };
        let mut heads = read_heads(&cache, &mut stats)?;
        let mut end = None;
        let mut history = vec![Vec::new(); k];
        loop {
            let first = columns.len();
            let chosen = match selections.as_mut() {
                Some(selections) => Some(viterbi_block(
                    selections, &layout, &heads, first, end, &history, sampler, &mut rng,
                )?),
                None => None,
            };
            let mut emitted = 0;
            for i in 0..n {
                let step = first + i;
                let raw: Vec<u32> = match &chosen {
                    Some(block) => block[i].clone(),
                    None => (0..k)
                        .map(|j| match layout.slot(j, step, end) {
                            Slot::Forced(id) => id,
                            Slot::Free { frame } => sampler.draw(
                                heads.row(i, j),
                                &history[j],
                                layout.banned(j, frame),
                                &mut rng,
                            ),
                        })
                        .collect(),
                };
                let column = layout.finish_column(step, &raw, &mut end);
                if i > 0 {
                    for j in 0..k {
                        if let Slot::Free { .. } = layout.slot(j, step, end) {
                            stats.drafted[j] += 1;
                            stats.accepted[j] += 1;
                        }
                    }
                }
                layout.record(step, &column, end, &mut history);
                columns.push(column);
                emitted += 1;
                if layout.done(columns.len(), end) {
                    break;
                }
            }
            stats.drafted_steps += n - 1;
            stats.accepted_steps += emitted - 1;
            if layout.done(columns.len(), end) {
                break;
            }
            timed(&mut stats.model_time, &mut stats.target_forwards, || {
                model.extend(&mut cache, &columns[first..])
            })?
            .check(emitted, k, vocab)?;
            heads = read_heads(&cache, &mut stats)?;
        }
        finish(&layout, columns, end, known, stats)
    }
}
