//! Errors of the aligner: every message names the file, utterance, field or shape at fault.

/// Errors raised while training, loading or running the aligner.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    /// An argument does not have the size or values an operation needs.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// What was passed (argument, tensor or file).
        what: &'static str,
        /// What is wrong, with the values involved.
        reason: String,
    },
    /// A config field holds an unsupported value.
    #[error("config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An utterance has fewer frames than its transcript has required phones.
    #[error("{frames} frames are too few for the {needed} phones of the transcript")]
    TooShort {
        /// Frames of the utterance.
        frames: usize,
        /// Required states of its topology.
        needed: usize,
    },
    /// One utterance failed; the message names it.
    #[error("utterance {id}: {source}")]
    Utterance {
        /// Utterance id.
        id: String,
        /// What failed.
        #[source]
        source: Box<AlignError>,
    },
    /// Reading a tensor back from the device failed.
    #[error("cannot read tensor `{what}` back from the device: {reason}")]
    TensorRead {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
    /// Audio decoding or the front end failed (the message names the file).
    #[error(transparent)]
    Audio(#[from] voxspec_audio::AudioError),
    /// Manifests, text normalisation or G2P failed.
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
    /// The transformer rejected its config or input.
    #[error("transformer: {0}")]
    Nn(#[from] voxspec_nn::NnError),
    /// The front end (shared with the CTC teacher) failed.
    #[error(transparent)]
    Teacher(#[from] voxspec_teacher::TeacherError),
    /// Model files could not be written or read (the message names the file).
    #[error(transparent)]
    Train(#[from] voxspec_train::TrainError),
    /// A run directory could not be created.
    #[error("creating {}", path.display())]
    CreateDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Training was stopped (Ctrl-C) before its last step; the checkpoint is kept.
    #[error(
        "stopped at step {step}; the checkpoint is in {}; continue with --resume",
        run_dir.display()
    )]
    Stopped {
        /// Steps done.
        step: usize,
        /// The run directory holding the checkpoint.
        run_dir: std::path::PathBuf,
    },
}

impl AlignError {
    /// An [`AlignError::InvalidInput`].
    pub(crate) fn input(what: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput {
            what,
            reason: reason.into(),
        }
    }

    /// This error, attributed to utterance `id`.
    pub(crate) fn for_utterance(self, id: &str) -> Self {
        Self::Utterance {
            id: id.to_string(),
            source: Box::new(self),
        }
    }
}
