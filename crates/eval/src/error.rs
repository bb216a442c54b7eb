//! The error type of `voxspec-eval`: every message names the file, utterance or plot at fault.

use std::path::PathBuf;

/// Everything that can stop an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A file or directory could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "creating", ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The input cannot be evaluated (an empty split, a transcript that is not a candidate, a
    /// model that does not fit the data, ...).
    #[error("{detail}")]
    Input {
        /// What is wrong, naming the file or utterance.
        detail: String,
    },
    /// One utterance could not be evaluated.
    #[error("utterance {id}: {source}")]
    Utterance {
        /// The utterance id.
        id: String,
        /// Why.
        #[source]
        source: Box<EvalError>,
    },
    /// The independent recogniser could not be found or run, or its report is unreadable.
    #[error("independent recogniser: {detail}")]
    Judge {
        /// What went wrong, naming the interpreter, script or report.
        detail: String,
    },
    /// A figure could not be drawn or written.
    #[error("plot \"{title}\": {detail}")]
    Plot {
        /// The plot's title.
        title: String,
        /// What went wrong.
        detail: String,
    },
    /// A JSON report could not be written.
    #[error("json error in {path}: {source}")]
    Json {
        /// The report file.
        path: PathBuf,
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
    /// Audio could not be read, resampled or written.
    #[error(transparent)]
    Audio(#[from] voxspec_audio::AudioError),
    /// A manifest or data file could not be read or written.
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
    /// The codec failed.
    #[error(transparent)]
    Codec(#[from] voxspec_codec::CodecError),
    /// The vocoder or Griffin-Lim failed.
    #[error(transparent)]
    Vocoder(#[from] voxspec_codec::VocoderError),
    /// A quality metric failed.
    #[error(transparent)]
    Metrics(#[from] voxspec_codec::MetricsError),
    /// The CTC teacher failed.
    #[error(transparent)]
    Teacher(#[from] voxspec_teacher::TeacherError),
    /// The synthesis pipeline failed.
    #[error(transparent)]
    Tts(#[from] voxspec_tts::TtsError),
    /// An AR model could not be built, loaded or run.
    #[error(transparent)]
    Mtp(#[from] voxspec_mtp::MtpError),
    /// A decoder or an acceptance measurement failed.
    #[error(transparent)]
    Infer(#[from] voxspec_infer::InferError),
    /// A result could not be read back from the device.
    #[error("reading {what}: {detail}")]
    Readback {
        /// What was read ("the codes", ...).
        what: &'static str,
        /// The backend's error.
        detail: String,
    },
    /// One step of a larger piece of work failed.
    #[error("{context}: {source}")]
    Context {
        /// The step, naming the file, clip or row ("clip 3 (a/3.wav)", ...).
        context: String,
        /// Why.
        #[source]
        source: Box<EvalError>,
    },
}

impl EvalError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn input(detail: impl Into<String>) -> Self {
        Self::Input {
            detail: detail.into(),
        }
    }

    /// This error, as one of the step `context`.
    pub(crate) fn context(self, context: impl Into<String>) -> Self {
        Self::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }

    /// This error, as one of utterance `id`.
    pub(crate) fn of(self, id: &str) -> Self {
        Self::Utterance {
            id: id.to_string(),
            source: Box::new(self),
        }
    }
}

/// `Result` with [`EvalError`].
pub type Result<T, E = EvalError> = std::result::Result<T, E>;
