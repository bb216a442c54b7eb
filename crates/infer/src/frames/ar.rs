//! [`FrameArDecoder`]: one target forward per step of the delayed grid, every free stream
//! position drawn in parallel (independent draws from its own head).
//!
//! ```text
//! prefill: steps 0 ..= P + delay_0 (only S and prompt codes)      → logits for the next step
//! step s:  column_s[j] = forced id, or draw(head_j, history_j, banned_j)
//!          stream 0's EOS fixes T; positions past T become S
//!          stop once s = T + max_delay, else extend([column_s])    → logits for step s + 1
//! ```

use super::layout::{Layout, Slot};
use super::model::FrameModel;
use super::{FrameDecoder, FrameGeneration, FrameRequest, FrameStats, finish, timed};
use crate::error::Result;
use crate::sampler::{SamplerConfig, seeded_rng};

/// Plain autoregressive decoding of a [`FrameModel`]: one forward per step.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameArDecoder;

impl FrameArDecoder {
    /// The decoder (it has no settings).
    pub fn new() -> Self {
        Self
    }
}

impl<M: FrameModel> FrameDecoder<M> for FrameArDecoder {
    fn name(&self) -> String {
        "frame-ar".into()
    }

    fn generate(
        &self,
        model: &M,
        request: &FrameRequest<M::Prompt>,
        sampler: &SamplerConfig,
    ) -> Result<FrameGeneration> {
        sampler.validate()?;
        let layout = Layout::new(model, request)?;
        let (k, vocab) = (layout.streams, layout.vocab);
        let mut stats = FrameStats::new(k);
        let mut rng = seeded_rng(request.seed);
        let mut cache = model.new_cache(&request.prompt, layout.steps(layout.max_frames))?;
        let mut columns = layout.known_columns();
        let known = columns.len();
        let mut logits = timed(&mut stats.model_time, &mut stats.target_forwards, || {
            model.prefill(&mut cache, &request.prompt, &columns)
        })?;
        logits.check(1, k, vocab)?;
        let mut end = None;
        let mut history = vec![Vec::new(); k];
        loop {
            let step = columns.len();
            let raw: Vec<u32> = (0..k)
                .map(|j| match layout.slot(j, step, end) {
                    Slot::Forced(id) => id,
                    Slot::Free { frame } => sampler.draw(
                        logits.row(0, j),
                        &history[j],
                        layout.banned(j, frame),
                        &mut rng,
                    ),
                })
                .collect();
            let column = layout.finish_column(step, &raw, &mut end);
            layout.record(step, &column, end, &mut history);
            columns.push(column);
            if layout.done(columns.len(), end) {
                break;
            }
            logits = timed(&mut stats.model_time, &mut stats.target_forwards, || {
                model.extend(&mut cache, &columns[step..])
            })?;
            logits.check(1, k, vocab)?;
        }
        finish(&layout, columns, end, known, stats)
    }
}
