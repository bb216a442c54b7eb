//! Errors of the training loop.

use std::path::PathBuf;

/// Everything that can stop a training run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// A file or directory could not be read or written.
    #[error("i/o error at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A JSON file (config, train state, parameter ids) could not be read or written.
    #[error("json error in {path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// Model weights could not be saved or loaded.
    #[error("model weights {path}: {message}")]
    Weights { path: PathBuf, message: String },
    /// Optimizer state could not be saved or loaded.
    #[error("optimizer state {path}: {message}")]
    Optimizer { path: PathBuf, message: String },
    /// A peer's benchmark report does not match this run.
    #[error("{}: {reason}", path.display())]
    Peer { path: PathBuf, reason: String },
    /// A configuration value is out of range.
    #[error("invalid training config: `{field}` {reason}")]
    Config { field: &'static str, reason: String },
    /// A parameter selection pattern (freeze list or phase) is not a valid regex.
    #[error("invalid parameter pattern {pattern:?}: {message}")]
    ParamPattern { pattern: String, message: String },
    /// Too many steps in a row had a non-finite loss or gradient.
    #[error(
        "{count} consecutive steps with a non-finite loss or gradient (last at step {step}); \
         last good checkpoint: {}",
        last_checkpoint.as_ref().map_or_else(|| "none".to_string(), |p| p.display().to_string())
    )]
    NonFinite {
        step: usize,
        count: usize,
        last_checkpoint: Option<PathBuf>,
    },
    /// The training data has an epoch without batches.
    #[error("training data epoch {epoch} has no batches")]
    EmptyEpoch { epoch: usize },
    /// The task declares no phase, or two phases with one name.
    #[error("invalid phases: {reason}")]
    Phases { reason: String },
    /// The Ctrl-C handler could not be installed.
    #[error("installing the Ctrl-C handler: {source}")]
    CtrlC {
        #[source]
        source: ctrlc::Error,
    },
    /// The task (model, data or loss) reported an error (shown as the task's own message).
    #[error(transparent)]
    Task(Box<dyn std::error::Error + Send + Sync>),
}

/// Result alias of this crate (import it as `Result as TrainResult` next to a `#[derive(Config)]`).
pub type Result<T> = std::result::Result<T, TrainError>;

impl TrainError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// Wraps any task-side error.
    pub fn task(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Task(error.into())
    }
}
