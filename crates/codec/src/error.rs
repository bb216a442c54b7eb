//! Errors of the codec crate: every message names the file, tensor, field or shape at fault.

use std::path::PathBuf;

use voxspec_nn::weights::WeightError;

/// Errors raised while loading or running codec components.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A config or weight file could not be read, or does not match the model (the message
    /// names the file and tensor).
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A config field holds a value this implementation does not support.
    #[error("config field `{field}`: {reason}")]
    InvalidConfig {
        /// The field (the checkpoint package's name where there is one).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading a tensor back from the device failed.
    #[error("cannot read tensor `{what}` back from the device: {reason}")]
    TensorRead {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
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
    /// A streaming decode cannot go on (see `DecodeStream`).
    #[error("streaming decode: {0}")]
    Streaming(String),
    /// An input cannot be used (empty audio, a negative code, ...).
    #[error("{detail}")]
    InvalidInput {
        /// What is wrong.
        detail: String,
    },
    /// A teacher feature store has no features for an utterance.
    #[error("no teacher features for utterance {id}; rerun `voxspec teacher extract`")]
    MissingFeatures {
        /// The utterance id.
        id: String,
    },
    /// Teacher features of another dimension than the codec reads.
    #[error("utterance {id}: {found}-d teacher features, the codec reads {expected}")]
    FeatureDim {
        /// The utterance id.
        id: String,
        /// Their dimension.
        found: usize,
        /// The codec's.
        expected: usize,
    },
    /// The audio of an utterance could not be read.
    #[error("utterance {id}: {source}")]
    Audio {
        /// The utterance id.
        id: String,
        /// Why.
        #[source]
        source: voxspec_audio::AudioError,
    },
    /// An utterance's codes do not have the frames its audio and manifest say.
    #[error("utterance {id}: {detail}")]
    FrameCount {
        /// The utterance id.
        id: String,
        /// The counts involved.
        detail: String,
    },
    /// Encoding one utterance failed.
    #[error("encoding utterance {id}: {source}")]
    Utterance {
        /// The utterance id.
        id: String,
        /// Why.
        #[source]
        source: Box<CodecError>,
    },
    /// A teacher feature store could not be read.
    #[error(transparent)]
    Teacher(#[from] voxspec_teacher::TeacherError),
    /// A token store or manifest could not be read or written.
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
    /// A teacher feature store could not be opened.
    #[error("opening the {split} teacher features in {}", dir.display())]
    FeatureStore {
        /// The split.
        split: String,
        /// The store's directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<voxspec_teacher::TeacherError>,
    },
    /// A teacher feature store holds features of another width than the codec reads.
    #[error("teacher features in {} are {found}-d but the codec reads {expected}", dir.display())]
    FeatureStoreDim {
        /// The store's directory.
        dir: PathBuf,
        /// The store's width.
        found: usize,
        /// The codec's.
        expected: usize,
    },
    /// A teacher gives features of another width than the codec reads.
    #[error("the teacher {} gives {found}-d features but the codec reads {expected}", dir.display())]
    TeacherDim {
        /// The teacher's directory.
        dir: PathBuf,
        /// The teacher's width.
        found: usize,
        /// The codec's.
        expected: usize,
    },
    /// A vocoder directory could not be loaded.
    #[error(
        "loading the vocoder {} (train one with `voxspec vocoder train`, or pass --griffin-lim)",
        dir.display()
    )]
    VocoderLoad {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<voxspec_train::TrainError>,
    },
    /// A vocoder does not take the log-mel a codec predicts.
    #[error("vocoder {}", dir.display())]
    VocoderMel {
        /// The vocoder's directory.
        dir: PathBuf,
        /// The mismatch.
        #[source]
        source: Box<VocoderError>,
    },
    /// The SoCodec settings of a new run cannot build a model.
    #[error("the SoCodec settings")]
    Settings {
        /// What is wrong.
        #[source]
        source: Box<CodecError>,
    },
    /// The training loop or a run directory failed.
    #[error(transparent)]
    Train(#[from] voxspec_train::TrainError),
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

impl CodecError {
    /// This error, as one of encoding utterance `id`.
    pub fn of(self, id: &str) -> Self {
        Self::Utterance {
            id: id.to_string(),
            source: Box::new(self),
        }
    }
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
    /// Audio at another sample rate than the vocoder's.
    #[error("the vocoder runs at {expected} Hz but the audio is at {found} Hz; resample it first")]
    SampleRate {
        /// The vocoder's rate.
        expected: u32,
        /// The audio's rate.
        found: u32,
    },
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
