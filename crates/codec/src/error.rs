//! Errors of the codec crate: every message names the file, tensor, field or shape at fault.

use std::path::PathBuf;

/// Errors raised while loading or running codec components.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON config file could not be parsed.
    #[error("{path} is not a valid config file: {source}")]
    ConfigParse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A config field holds a value this implementation does not support.
    #[error("config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field (Hugging Face name where there is one).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A weight file is not a readable safetensors file.
    #[error("{path} is not a valid safetensors file: {reason}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What the parser reported.
        reason: String,
    },
    /// A tensor the model needs is absent from the weight file.
    #[error("tensor `{name}` is missing from {path}")]
    MissingTensor {
        /// The tensor name as expected in the file.
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// A tensor of the weight file does not have the shape the config implies.
    #[error("tensor `{name}` in {path} has shape {found:?}, but the config implies {expected:?}")]
    ShapeMismatch {
        /// The tensor name in the file.
        name: String,
        /// The file.
        path: PathBuf,
        /// The shape implied by the config (in the file's layout).
        expected: Vec<usize>,
        /// The shape found in the file.
        found: Vec<usize>,
    },
    /// The weight file holds tensors no module consumes.
    #[error("{path} holds {} tensor(s) the model does not use: {names:?}", names.len())]
    UnexpectedTensors {
        /// The file.
        path: PathBuf,
        /// The unused tensor names.
        names: Vec<String>,
    },
    /// A tensor is stored with an element type the loader cannot convert.
    #[error("tensor `{name}` in {path} has dtype {dtype}; expected F32, F16 or BF16")]
    UnsupportedDtype {
        /// The tensor name in the file.
        name: String,
        /// The file.
        path: PathBuf,
        /// The dtype found.
        dtype: String,
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
    /// A quantizer layer range is empty or exceeds the layers.
    #[error("quantizer layers {start}..{} requested, but the quantizer has {available}", start + count)]
    QuantizerLayers {
        /// First layer requested.
        start: usize,
        /// Number of layers requested.
        count: usize,
        /// Layers the quantizer has.
        available: usize,
    },
    /// A tensor given to a quantizer or codec has the wrong shape.
    #[error("{what}: expected shape {expected:?}, found {found:?}")]
    QuantizerShape {
        /// What the tensor is.
        what: &'static str,
        /// The expected shape.
        expected: Vec<usize>,
        /// The shape found.
        found: Vec<usize>,
    },
    /// A checkpoint does not match its config: every missing, unexpected or wrongly shaped
    /// tensor is listed.
    #[error("{path} does not match its config ({} problem(s)):\n  {}", problems.len(), problems.join("\n  "))]
    CheckpointMismatch {
        /// The weight file.
        path: PathBuf,
        /// One line per tensor at fault, naming it and the shapes.
        problems: Vec<String>,
    },
}

/// Errors of the vocoder and Griffin-Lim (`crate::vocoder`).
#[derive(Debug, thiserror::Error)]
pub enum VocoderError {
    /// A vocoder or STFT config field is out of range.
    #[error("vocoder config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// An input has a shape the vocoder cannot take.
    #[error("{what}: expected shape {expected}, got {found:?}")]
    Shape {
        /// Which input.
        what: &'static str,
        /// The expected shape, in words.
        expected: String,
        /// The shape found.
        found: Vec<usize>,
    },
    /// The audio front end rejected its settings.
    #[error("audio front end: {0}")]
    Audio(#[from] voxspec_audio::AudioError),
    /// Reading a tensor back from the device failed.
    #[error("cannot read tensor `{what}` back from the device: {reason}")]
    TensorRead {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
}

/// Errors of the quality metrics (`crate::metrics`).
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A metric config field is out of range.
    #[error("metric config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A waveform to compare has no samples.
    #[error("the {which} waveform is empty")]
    Empty {
        /// `reference` or `synthesis`.
        which: &'static str,
    },
    /// A waveform is not at the rate the metric was set up for.
    #[error(
        "the {which} waveform is at {found} Hz but the metric was set up for {expected} Hz; \
         resample it first"
    )]
    RateMismatch {
        /// `reference` or `synthesis`.
        which: &'static str,
        /// The rate the metric expects.
        expected: u32,
        /// The waveform's rate.
        found: u32,
    },
    /// The log-mel front end rejected its settings.
    #[error("mel front end: {0}")]
    Audio(#[from] voxspec_audio::AudioError),
}
