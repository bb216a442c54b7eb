//! The run directory of a training command: what `--resume` needs besides the checkpoints.
//!
//! ```text
//! <out>/run.json   { "kind": "<command>", "settings": { ...the task's settings... } }
//! <out>/checkpoint-NNNNNN/ ...   (written by the trainer)
//! ```
//!
//! A new run writes `run.json` (atomically); a resumed run reads its settings back instead of
//! the flags, so the model and data cannot silently change under a checkpoint. A directory
//! that holds checkpoints is reused only with `--resume`, and only by the same kind of run.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::checkpoint::list_checkpoints;
use crate::error::{Result, TrainError};

/// File name of the run settings inside a run directory.
pub const RUN_FILE: &str = "run.json";

#[derive(Serialize, Deserialize)]
struct RunFile<T> {
    kind: String,
    settings: T,
}

/// How a training command starts in its run directory.
#[derive(Debug, Clone, PartialEq)]
pub enum RunStart<T> {
    /// No checkpoint there: a new run (the caller builds its settings and calls
    /// [`save_run_settings`]). `resume_ignored` says `--resume` was given with nothing to resume.
    New {
        /// `--resume` was given but the directory holds no checkpoint.
        resume_ignored: bool,
    },
    /// Checkpoints and `--resume`: continue with the settings saved by the run.
    Resume(T),
}

/// Opens the run directory `dir` (created if missing) of a `kind` run.
///
/// # Errors
/// [`TrainError::Config`] when `dir` holds checkpoints and `resume` is false, or when its
/// `run.json` belongs to another kind of run; I/O and JSON errors naming the file.
pub fn open_run<T: DeserializeOwned>(dir: &Path, kind: &str, resume: bool) -> Result<RunStart<T>> {
    std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
    let has_checkpoints = !list_checkpoints(dir)?.is_empty();
    if !has_checkpoints {
        return Ok(RunStart::New {
            resume_ignored: resume,
        });
    }
    if !resume {
        return Err(TrainError::Config {
            field: "resume",
            reason: format!(
                "is needed: {} already holds checkpoints (pass --resume to continue that run, \
                 or choose another --out)",
                dir.display()
            ),
        });
    }
    let path = run_file(dir);
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
    let run: RunFile<serde_json::Value> =
        serde_json::from_str(&text).map_err(|source| TrainError::Json {
            path: path.clone(),
            source,
        })?;
    if run.kind != kind {
        return Err(TrainError::Config {
            field: "resume",
            reason: format!(
                "{} belongs to a `{}` run, not `{kind}`",
                path.display(),
                run.kind
            ),
        });
    }
    let settings =
        serde_json::from_value(run.settings).map_err(|source| TrainError::Json { path, source })?;
    Ok(RunStart::Resume(settings))
}

/// Writes the settings of a new `kind` run to `<dir>/run.json`, atomically.
///
/// # Errors
/// I/O and JSON errors naming the file.
pub fn save_run_settings<T: Serialize>(dir: &Path, kind: &str, settings: &T) -> Result<()> {
    let path = run_file(dir);
    let text = serde_json::to_string_pretty(&RunFile {
        kind: kind.to_string(),
        settings,
    })
    .map_err(|source| TrainError::Json {
        path: path.clone(),
        source,
    })?;
    let tmp = dir.join(format!(".{RUN_FILE}.tmp"));
    std::fs::write(&tmp, text).map_err(|e| TrainError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| TrainError::io(&path, e))
}

/// `<dir>/run.json`.
pub fn run_file(dir: &Path) -> PathBuf {
    dir.join(RUN_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_resumes_only_with_resume_and_only_as_its_own_kind() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        assert_eq!(
            open_run::<u32>(&out, "mtp", true).unwrap(),
            RunStart::New {
                resume_ignored: true
            }
        );
        save_run_settings(&out, "mtp", &7u32).unwrap();
        // No checkpoint yet: still a new run.
        assert!(matches!(
            open_run::<u32>(&out, "mtp", false).unwrap(),
            RunStart::New { .. }
        ));
        std::fs::create_dir_all(out.join("checkpoint-000004")).unwrap();
        let err = open_run::<u32>(&out, "mtp", false).unwrap_err().to_string();
        assert!(err.contains("--resume"), "{err}");
        assert_eq!(
            open_run::<u32>(&out, "mtp", true).unwrap(),
            RunStart::Resume(7)
        );
        let err = open_run::<u32>(&out, "nar", true).unwrap_err().to_string();
        assert!(err.contains("`mtp` run"), "{err}");
    }
}
