//! Writing a teacher's features of a corpus split into a feature store: audio read in parallel
//! and resampled to the teacher's rate, features computed a batch at a time, utterances already
//! in the store skipped (an interrupted extraction resumes where it stopped).

use std::path::Path;

use rayon::prelude::*;
use voxspec_data::{Progress, Utterance};

use crate::any::AnyTeacher;
use crate::error::TeacherError;
use crate::feature_store::{FeatureStoreWriter, Features};

/// What writing one split's features did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitFeatures {
    /// Utterances whose features were written now.
    pub written: usize,
    /// Utterances the store already held.
    pub kept: usize,
    /// Feature frames written now.
    pub frames: usize,
}

/// Writes `teacher`'s features of every utterance of `utterances` not yet in the store
/// `<out>/<split>-NNNNN.safetensors` (new shards after `shard_frames` frames), `batch`
/// utterances per forward pass. `progress` counts the utterances to compute, named `split`.
///
/// # Errors
/// [`TeacherError::UtteranceAudio`] naming an utterance whose audio cannot be read,
/// [`TeacherError::FeatureRead`], the teacher's errors, and the store's (another teacher's
/// shards in `out`, I/O).
pub fn extract_split(
    teacher: &AnyTeacher,
    utterances: &[Utterance],
    (out, split): (&Path, &str),
    (batch, shard_frames): (usize, usize),
    progress: &dyn Progress,
) -> Result<SplitFeatures, TeacherError> {
    let rate = teacher.as_teacher().sample_rate();
    let mut writer = FeatureStoreWriter::new(out, split, teacher.store_meta(), shard_frames)?;
    let todo: Vec<&Utterance> = utterances
        .iter()
        .filter(|u| !writer.contains(&u.id))
        .collect();
    progress.start(todo.len() as u64, split);
    let mut frames = 0usize;
    for chunk in todo.chunks(batch.max(1)) {
        let waves = chunk
            .par_iter()
            .map(|u| {
                voxspec_audio::load_resampled(Path::new(&u.path), rate)
                    .map(|a| a.samples)
                    .map_err(|source| TeacherError::UtteranceAudio {
                        id: u.id.clone(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
        for (u, f) in chunk.iter().zip(teacher.features(&refs)?) {
            let [n, dim] = f.dims();
            let data =
                f.into_data()
                    .try_into_vec_as::<f32>()
                    .map_err(|e| TeacherError::FeatureRead {
                        id: u.id.clone(),
                        reason: format!("{e:?}"),
                    })?;
            frames += n;
            writer.push(
                &u.id,
                Features {
                    frames: n,
                    dim,
                    data,
                },
            )?;
        }
        progress.inc(chunk.len() as u64);
    }
    writer.finish()?;
    progress.finish();
    Ok(SplitFeatures {
        written: todo.len(),
        kept: utterances.len() - todo.len(),
        frames,
    })
}
