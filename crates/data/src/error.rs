//! The error type of `voxspec-data`. Every variant names the file, field or shape at fault.

use std::path::PathBuf;

use voxspec_audio::AudioError;

/// Everything that can go wrong while preparing, reading or batching data.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An I/O operation on `path` failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("reading", "writing", "creating directory", ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line of a JSON-lines manifest could not be parsed.
    #[error("{path}:{line}: invalid manifest entry: {detail}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A TextGrid (phone alignment) file is malformed or has no usable phone tier.
    #[error("{path}:{line}: invalid TextGrid: {detail}")]
    TextGrid {
        /// The TextGrid file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// A corpus directory does not have the expected layout.
    #[error("corpus layout error in {path}: {detail}")]
    Layout {
        /// The directory at fault.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Manifests already exist and were prepared with different settings.
    #[error(
        "{dir} holds manifests prepared with different settings ({detail}); pass --force to rebuild them"
    )]
    StaleManifests {
        /// The output directory.
        dir: PathBuf,
        /// Which setting differs.
        detail: String,
    },
    /// A token store shard is malformed.
    #[error("token store {path}: {detail}")]
    TokenStore {
        /// The shard or index file.
        path: PathBuf,
        /// What is wrong (tensor name, shape, dtype, value).
        detail: String,
    },
    /// A codes file (`codec encode` output) is malformed.
    #[error("codes file {path}: {detail}")]
    CodesFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (format, tensor name, shape, dtype).
        detail: String,
    },
    /// A tokenizer could not be trained, loaded, saved or applied.
    #[error("tokenizer{}: {detail}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Tokenizer {
        /// The tokenizer file, when one is involved.
        path: Option<PathBuf>,
        /// What is wrong.
        detail: String,
    },
    /// Text that cannot be used (empty after normalisation, ...).
    #[error("text of {id:?}: {detail}")]
    Text {
        /// The utterance id or a description of the input.
        id: String,
        /// What is wrong.
        detail: String,
    },
    /// An utterance in a manifest has no entry in a token store.
    #[error("utterance {id:?} has no codes in the token store at {store}")]
    MissingCodes {
        /// Utterance id.
        id: String,
        /// Token store directory.
        store: PathBuf,
    },
    /// The bundled pronunciation dictionary could not be parsed.
    #[error("pronunciation dictionary (CMUdict): {detail}")]
    Dictionary {
        /// What is wrong.
        detail: String,
    },
    /// A phone label that is not in the phone set (see `phones::normalize_phone`).
    #[error("unknown phone label {label:?} at position {index}")]
    UnknownPhone {
        /// The label as given.
        label: String,
        /// Its 0-based position in the input.
        index: usize,
    },
    /// The token store of a split could not be opened.
    #[error("opening the {split} token store")]
    OpenStore {
        /// The split (`train`, `dev`).
        split: &'static str,
        /// The store's error.
        #[source]
        source: Box<DataError>,
    },
    /// A prepared data directory has no training utterances.
    #[error("{} has no training utterances", data.display())]
    NoTrainingUtterances {
        /// The data directory.
        data: PathBuf,
    },
    /// No training utterance has codes in the token store.
    #[error("no training utterance has codes in {}", tokens.display())]
    NoTrainingCodes {
        /// The token store directory.
        tokens: PathBuf,
    },
    /// An invalid setting.
    #[error("invalid {field}: {detail}")]
    Config {
        /// The setting's name.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// An audio file could not be read.
    #[error(transparent)]
    Audio(#[from] AudioError),
    /// An utterance's audio file could not be read.
    #[error("utterance {id}: {} is not readable audio", path.display())]
    UtteranceAudio {
        /// The utterance.
        id: String,
        /// Its audio file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: AudioError,
    },
    /// None of the splits asked for has a manifest.
    #[error("no manifest for the splits {splits:?} in {}", data.display())]
    NoSplits {
        /// The splits asked for.
        splits: Vec<String>,
        /// The prepared directory.
        data: PathBuf,
    },
    /// A dataset index out of range.
    #[error("index {index} out of range for a dataset of {len} items")]
    OutOfRange {
        /// The requested index.
        index: usize,
        /// The dataset length.
        len: usize,
    },
}

impl DataError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        DataError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = DataError> = std::result::Result<T, E>;
