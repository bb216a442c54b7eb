//! Errors of the teacher crate: every message names the file, tensor, field or shape at fault.

use std::path::PathBuf;

use voxspec_nn::weights::WeightError;

/// Errors raised while loading, training or running a semantic teacher, or reading and writing
/// its feature stores.
#[derive(Debug, thiserror::Error)]
pub enum TeacherError {
    /// A config or weight file could not be read, or does not match the model (the message
    /// names the file and tensor).
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A config field holds a value this implementation does not support.
    #[error("config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field (Hugging Face name where there is one).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A waveform is too short to produce a single frame.
    #[error("waveform of {samples} samples is shorter than the receptive field ({min} samples)")]
    WaveTooShort {
        /// Samples given.
        samples: usize,
        /// Samples needed for one frame.
        min: usize,
    },
    /// A requested hidden-state index does not exist.
    #[error("hidden state {layer} requested, but the model has {available} (0..={})", available - 1)]
    LayerOutOfRange {
        /// The requested index.
        layer: usize,
        /// Number of hidden states (num_hidden_layers + 1).
        available: usize,
    },
    /// Reading a tensor back from the device failed.
    #[error("cannot read tensor `{what}` back from the device: {reason}")]
    TensorRead {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
    /// An argument does not have the size or values an operation needs.
    #[error("invalid {what}: {reason}")]
    InvalidInput {
        /// What was passed (argument or tensor).
        what: &'static str,
        /// What is wrong, with the values involved.
        reason: String,
    },
    /// Audio decoding, resampling or the log-mel front end failed (the message names the file).
    #[error(transparent)]
    Audio(#[from] voxspec_audio::AudioError),
    /// Manifests, the tokenizer or bucketing failed (the message names the file or id).
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
    /// The transformer rejected its config or input.
    #[error("transformer: {0}")]
    Nn(#[from] voxspec_nn::NnError),
    /// A feature store shard is malformed or does not match the store's settings.
    #[error("feature store {path}: {reason}")]
    FeatureStore {
        /// The shard or directory.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A teacher directory's `config.json` could not be read.
    #[error("reading {}", path.display())]
    ConfigRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A teacher directory's `config.json` is not JSON.
    #[error("{} is not JSON", path.display())]
    ConfigJson {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A teacher directory could not be loaded.
    #[error("loading the {kind} teacher {}", dir.display())]
    Load {
        /// `CTC` or `HuBERT`.
        kind: &'static str,
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<TeacherError>,
    },
    /// The audio of an utterance could not be read.
    #[error("utterance {id}")]
    UtteranceAudio {
        /// The utterance id.
        id: String,
        /// Why.
        #[source]
        source: voxspec_audio::AudioError,
    },
    /// Features of an utterance could not be read back from the device.
    #[error("reading the features of {id}: {reason}")]
    FeatureRead {
        /// The utterance id.
        id: String,
        /// The backend's message.
        reason: String,
    },
    /// One utterance of a manifest failed.
    #[error("utterance {id} of {}", manifest.display())]
    Utterance {
        /// The utterance id.
        id: String,
        /// The manifest it is in.
        manifest: PathBuf,
        /// Why.
        #[source]
        source: Box<TeacherError>,
    },
}
