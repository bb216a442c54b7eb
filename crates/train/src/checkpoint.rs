//! Atomic checkpoints of a training run.
//!
//! ```text
//! <run>/
//!   metrics.jsonl, events.out.tfevents.*
//!   checkpoint-000200/
//!     config.json            {"voxspec_version", "train": TrainConfig, "task": <task config>}
//!     model.safetensors      weights under their module paths
//!     train_state/
//!       state.json           step, data position (epoch, batch), RNG seed, skip counters
//!       param_ids.json       module path → ParamId (optimizer state is keyed by ParamId)
//!       optimizer-<phase>.bpk  AdamW moments per phase (burnpack)
//! ```
//! A checkpoint is written into `.tmp-checkpoint-<step>`, every file and the directory are
//! fsynced, then it is renamed into place: a kill leaves either the old or the new one whole.
//! Only the last `keep` complete checkpoints are kept.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};

const PREFIX: &str = "checkpoint-";
const TMP_PREFIX: &str = ".tmp-checkpoint-";

/// Everything besides weights and optimizer moments that exact resume needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Optimizer steps done (the next step has this index); also the scheduler position.
    pub step: usize,
    /// Epoch of the next training batch.
    pub epoch: usize,
    /// Index within `epoch` of the next training batch.
    pub batch_index: usize,
    /// RNG: the device is reseeded from (`seed`, step, phase, micro-batch) before every loss, so
    /// the seed and the step are the whole RNG state.
    pub seed: u64,
    /// Steps skipped for a non-finite loss or gradient, in total.
    pub skipped_steps: usize,
    /// Non-finite steps in a row at the time of the checkpoint.
    pub consecutive_nonfinite: usize,
    /// Model replicas (devices) of the run: each step reads `grad_accum` micro-batches per
    /// replica, so resuming on another number of devices changes the data per step.
    #[serde(default = "one")]
    pub replicas: usize,
}

fn one() -> usize {
    1
}

/// Config file written in each checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CheckpointConfig {
    /// Version of voxspec-train that wrote it.
    pub voxspec_version: String,
    /// The training config.
    pub train: crate::TrainConfig,
    /// The task's own config ([`crate::TrainTask::config`]).
    pub task: serde_json::Value,
}

/// Paths inside one checkpoint directory.
#[derive(Debug, Clone)]
pub struct CheckpointPaths {
    /// The directory.
    pub dir: PathBuf,
}

impl CheckpointPaths {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.json")
    }
    pub fn model(&self) -> PathBuf {
        self.dir.join("model.safetensors")
    }
    pub fn train_state_dir(&self) -> PathBuf {
        self.dir.join("train_state")
    }
    pub fn state(&self) -> PathBuf {
        self.train_state_dir().join("state.json")
    }
    pub fn param_ids(&self) -> PathBuf {
        self.train_state_dir().join("param_ids.json")
    }
    pub fn optimizer(&self, phase: &str) -> PathBuf {
        self.train_state_dir()
            .join(format!("optimizer-{phase}.bpk"))
    }
}

/// Name of the checkpoint of `step`.
pub(crate) fn checkpoint_name(step: usize) -> String {
    format!("{PREFIX}{step:06}")
}

/// Complete checkpoints in `run_dir`, oldest first.
pub fn list_checkpoints(run_dir: &Path) -> Result<Vec<(usize, PathBuf)>> {
    let mut found = Vec::new();
    let entries = match fs::read_dir(run_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(TrainError::io(run_dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| TrainError::io(run_dir, e))?;
        let name = entry.file_name();
        let Some(step) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        if entry.path().is_dir() {
            found.push((step, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// The newest complete checkpoint in `run_dir`, if any.
pub fn latest_checkpoint(run_dir: &Path) -> Result<Option<PathBuf>> {
    Ok(list_checkpoints(run_dir)?.pop().map(|(_, p)| p))
}

/// A checkpoint directory being written; [`PendingCheckpoint::commit`] makes it visible.
pub(crate) struct PendingCheckpoint {
    run_dir: PathBuf,
    step: usize,
    pub paths: CheckpointPaths,
}

impl PendingCheckpoint {
    /// Creates an empty temporary directory for the checkpoint of `step`.
    pub fn begin(run_dir: &Path, step: usize) -> Result<Self> {
        let tmp = run_dir.join(format!("{TMP_PREFIX}{step:06}"));
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
        }
        let paths = CheckpointPaths::new(tmp);
        let state_dir = paths.train_state_dir();
        fs::create_dir_all(&state_dir).map_err(|e| TrainError::io(&state_dir, e))?;
        Ok(Self {
            run_dir: run_dir.to_path_buf(),
            step,
            paths,
        })
    }

    /// fsyncs everything, renames the directory into place and prunes old checkpoints.
    pub fn commit(self, keep: usize) -> Result<PathBuf> {
        let state_dir = self.paths.train_state_dir();
        sync_dir_files(&state_dir)?;
        sync_dir_files(&self.paths.dir)?;
        let target = self.run_dir.join(checkpoint_name(self.step));
        if target.exists() {
            fs::remove_dir_all(&target).map_err(|e| TrainError::io(&target, e))?;
        }
        fs::rename(&self.paths.dir, &target).map_err(|e| TrainError::io(&target, e))?;
        sync_path(&self.run_dir)?;
        let all = list_checkpoints(&self.run_dir)?;
        for (_, old) in all.iter().take(all.len().saturating_sub(keep)) {
            fs::remove_dir_all(old).map_err(|e| TrainError::io(old, e))?;
        }
        Ok(target)
    }
}

/// Removes temporary directories left by a killed run.
pub(crate) fn remove_stale_temporaries(run_dir: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(run_dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let is_tmp = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(TMP_PREFIX));
        if is_tmp {
            let path = entry.path();
            fs::remove_dir_all(&path).map_err(|e| TrainError::io(&path, e))?;
        }
    }
    Ok(())
}

fn sync_path(path: &Path) -> Result<()> {
    fs::File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| TrainError::io(path, e))
}

fn sync_dir_files(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| TrainError::io(dir, e))? {
        let path = entry.map_err(|e| TrainError::io(dir, e))?.path();
        if path.is_file() {
            sync_path(&path)?;
        }
    }
    sync_path(dir)
}

pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|source| TrainError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    fs::write(path, text).map_err(|e| TrainError::io(path, e))
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
    serde_json::from_str(&text).map_err(|source| TrainError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Module path → ParamId value.
pub(crate) type ParamIds = BTreeMap<String, u64>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_renames_and_prunes() {
        let dir = tempfile::tempdir().expect("tempdir");
        for step in [1, 2, 3] {
            let pending = PendingCheckpoint::begin(dir.path(), step).expect("begin");
            write_json(&pending.paths.state(), &step).expect("write");
            pending.commit(2).expect("commit");
        }
        fs::create_dir(dir.path().join(format!("{TMP_PREFIX}000004"))).expect("tmp");
        let steps: Vec<usize> = list_checkpoints(dir.path())
            .expect("list")
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(steps, vec![2, 3]);
        let latest = latest_checkpoint(dir.path())
            .expect("latest")
            .expect("some");
        let step: usize = read_json(&CheckpointPaths::new(latest).state()).expect("read");
        assert_eq!(step, 3);
        remove_stale_temporaries(dir.path()).expect("clean");
        assert!(!dir.path().join(format!("{TMP_PREFIX}000004")).exists());
    }
}
