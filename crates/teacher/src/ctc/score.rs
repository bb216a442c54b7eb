//! Scoring a manifest with the CTC teacher: greedy transcripts of every utterance against its
//! normalised transcript, as character error counts.

use std::path::Path;

use rayon::prelude::*;
use voxspec_data::{Progress, Utterance};

use crate::ctc::cer::ErrorCounts;
use crate::ctc::teacher::CtcTeacher;
use crate::error::TeacherError;
use crate::teacher::SemanticTeacher;

/// One utterance's transcript and error counts.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredUtterance {
    /// The utterance id.
    pub id: String,
    /// Its transcript after the teacher's normalisation.
    pub reference: String,
    /// The teacher's greedy transcript.
    pub hypothesis: String,
    /// Edit counts of the hypothesis against the reference.
    pub counts: ErrorCounts,
}

impl CtcTeacher {
    /// Transcribes every utterance (audio read in parallel and resampled to the teacher's
    /// rate, `batch` clips per forward) and returns the summed error counts and one
    /// [`ScoredUtterance`] per utterance, in order; `progress` counts utterances.
    ///
    /// # Errors
    /// [`TeacherError::Audio`] naming an unreadable file; the teacher's errors.
    pub fn score_utterances(
        &self,
        utterances: &[Utterance],
        batch: usize,
        progress: &dyn Progress,
    ) -> Result<(ErrorCounts, Vec<ScoredUtterance>), TeacherError> {
        let rate = self.sample_rate();
        progress.start(utterances.len() as u64, "transcribe");
        let mut total = ErrorCounts::default();
        let mut scored = Vec::with_capacity(utterances.len());
        for chunk in utterances.chunks(batch.max(1)) {
            let waves = chunk
                .par_iter()
                .map(|u| voxspec_audio::load_resampled(Path::new(&u.path), rate).map(|a| a.samples))
                .collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
            let hyps = self.transcribe_batch(&refs)?;
            for (u, hypothesis) in chunk.iter().zip(hyps) {
                let reference = self.normalize(&u.text)?;
                let counts = ErrorCounts::between(&hypothesis, &reference);
                total += counts;
                scored.push(ScoredUtterance {
                    id: u.id.clone(),
                    reference,
                    hypothesis,
                    counts,
                });
            }
            progress.inc(chunk.len() as u64);
        }
        progress.finish();
        Ok((total, scored))
    }
}
