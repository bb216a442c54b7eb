//! The error type of `voxspec-engine`. Every variant names the value or shape at fault.

use voxspec_infer::InferError;

/// Everything that can go wrong while building or running the native engine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The Burn model and its config disagree, or the model uses something the engine lacks.
    #[error("cannot build the native engine: {detail}")]
    Model {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// A parameter tensor could not be read back from Burn.
    #[error("cannot read parameter {name}: {detail}")]
    Parameter {
        /// The module path of the parameter.
        name: String,
        /// Burn's error.
        detail: String,
    },
    /// A cache was asked for more positions than the position tables cover.
    #[error("cache capacity {capacity} exceeds the model's max_seq_len {max_seq_len}")]
    CapacityTooLarge {
        /// Positions requested.
        capacity: usize,
        /// Positions the model supports.
        max_seq_len: usize,
    },
    /// A block would run a sequence past its cache's capacity.
    #[error(
        "sequence {sequence}: {length} cached + {new} new positions exceed the capacity {capacity}"
    )]
    CacheOverflow {
        /// The sequence.
        sequence: usize,
        /// Its cached positions.
        length: usize,
        /// Positions in the block.
        new: usize,
        /// The cache's capacity.
        capacity: usize,
    },
    /// A cache of another layout or batch size was passed.
    #[error("cache mismatch: {detail}")]
    CacheMismatch {
        /// What differs.
        detail: String,
    },
    /// A weight format name that is not `f32`, `bf16` or `int8`.
    #[error("unknown weight format {name:?} (expected f32, bf16 or int8)")]
    UnknownWeightFormat {
        /// The name given.
        name: String,
    },
    /// An input of the wrong shape or out of range.
    #[error("bad input: {detail}")]
    Input {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// Loading the model directory failed.
    #[error("loading {path}: {detail}")]
    Load {
        /// The directory.
        path: String,
        /// The loader's error.
        detail: String,
    },
}

/// `Result` with [`EngineError`].
pub type Result<T> = std::result::Result<T, EngineError>;

impl From<EngineError> for InferError {
    fn from(e: EngineError) -> Self {
        InferError::Model(e.to_string())
    }
}
