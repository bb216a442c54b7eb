//! The CTC teacher's character error rate on a manifest: the dev score a `voxspec train ctc`
//! run ends with (`eval.json`), and per-utterance lines for `voxspec teacher score`.

use serde::Serialize;
use voxspec_data::{Progress, Utterance};
use voxspec_teacher::ctc::{CtcTeacher, ErrorCounts, ScoredUtterance};

use crate::error::Result;

/// Utterances the teacher transcribes at once.
const BATCH: usize = 16;

/// The dev score of a trained CTC teacher (written as `eval.json`).
#[derive(Debug, Clone, Serialize)]
pub struct CtcDevScore {
    /// The split scored.
    pub split: String,
    /// The training step of the model.
    pub step: usize,
    /// Utterances scored.
    pub utterances: usize,
    /// Corpus character error rate.
    pub cer: f64,
    /// Summed edit counts.
    pub counts: ErrorCounts,
    /// Wall-clock seconds of training.
    pub train_seconds: f64,
}

impl CtcDevScore {
    /// Transcribes the `dev` split with `teacher` (trained for `step` steps in `train_seconds`)
    /// and scores it.
    ///
    /// # Errors
    /// The teacher's errors.
    pub fn score(
        teacher: &CtcTeacher,
        dev: &[Utterance],
        step: usize,
        train_seconds: f64,
        progress: &dyn Progress,
    ) -> Result<Self> {
        let (counts, _) = teacher.score_utterances(dev, BATCH, progress)?;
        Ok(Self {
            split: "dev".into(),
            step,
            utterances: dev.len(),
            cer: counts.rate(),
            counts,
            train_seconds,
        })
    }
}

/// One JSON line per scored utterance: id, reference, hypothesis, edits, characters and CER.
pub fn utterance_lines(scored: Vec<ScoredUtterance>) -> Vec<serde_json::Value> {
    scored
        .into_iter()
        .map(|s| {
            serde_json::json!({
                "id": s.id,
                "reference": s.reference,
                "hypothesis": s.hypothesis,
                "edits": s.counts.edits(),
                "chars": s.counts.reference_len,
                "cer": s.counts.rate(),
            })
        })
        .collect()
}
