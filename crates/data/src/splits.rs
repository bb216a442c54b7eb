//! Several splits of a prepared directory at once, and a split's audio in memory.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::corpus::Progress;
use crate::error::{DataError, Result};
use crate::manifest::{Utterance, read_manifest};

/// One split's manifest of a prepared directory, read.
#[derive(Debug, Clone)]
pub struct SplitManifest {
    /// The split (`train`, `dev`, ...).
    pub name: String,
    /// `<data>/<name>.jsonl`.
    pub path: PathBuf,
    /// Its utterances.
    pub utterances: Vec<Utterance>,
}

/// The manifests of `splits` in the prepared directory `data`, read. A split without one is
/// skipped and handed to `skipped` (its name and the missing path).
///
/// # Errors
/// [`DataError::NoSplits`] when none of them has a manifest; the manifests' read errors.
pub fn read_splits(
    data: &Path,
    splits: &[String],
    mut skipped: impl FnMut(&str, &Path),
) -> Result<Vec<SplitManifest>> {
    let mut out = Vec::with_capacity(splits.len());
    for split in splits {
        let path = data.join(format!("{split}.jsonl"));
        if !path.is_file() {
            skipped(split, &path);
            continue;
        }
        out.push(SplitManifest {
            name: split.clone(),
            utterances: read_manifest(&path)?,
            path,
        });
    }
    if out.is_empty() {
        return Err(DataError::NoSplits {
            splits: splits.to_vec(),
            data: data.to_path_buf(),
        });
    }
    Ok(out)
}

/// The audio of every utterance at `rate` (decoded in parallel, `progress` counting files under
/// the name `what`).
///
/// # Errors
/// [`DataError::UtteranceAudio`] naming the first utterance whose file is not readable audio.
pub fn load_waves(
    utterances: &[Utterance],
    rate: u32,
    what: &str,
    progress: &dyn Progress,
) -> Result<Vec<Vec<f32>>> {
    progress.start(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let path = Path::new(&u.path);
            let wave = voxspec_audio::load_resampled(path, rate)
                .map(|a| a.samples)
                .map_err(|source| DataError::UtteranceAudio {
                    id: u.id.clone(),
                    path: path.to_path_buf(),
                    source,
                });
            progress.inc(1);
            wave
        })
        .collect::<Result<Vec<_>>>();
    progress.finish();
    out
}
