//! The error type of `voxspec-multistream`.

use voxspec_data::DataError;
use voxspec_nn::NnError;

/// Everything that can go wrong when building, running, training or decoding a multi-stream LM.
#[derive(Debug, thiserror::Error)]
pub enum MultiStreamError {
    /// The configuration cannot describe a model.
    #[error("invalid multi-stream LM config: {detail}")]
    InvalidConfig {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// A token is outside its vocabulary.
    #[error("{what} token {token} is outside the vocabulary of {vocab}")]
    TokenOutOfRange {
        /// "text" or "code".
        what: &'static str,
        /// The token.
        token: u32,
        /// The vocabulary size.
        vocab: usize,
    },
    /// An input is malformed (wrong stream count, missing voice vector, ...).
    #[error("invalid input: {detail}")]
    InvalidInput {
        /// What is wrong, with the values involved.
        detail: String,
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
    /// The transformer core failed.
    #[error(transparent)]
    Nn(#[from] NnError),
    /// The delay pattern refused a layout.
    #[error(transparent)]
    Data(#[from] DataError),
    /// Saving or loading a model directory failed.
    #[error(transparent)]
    Files(#[from] voxspec_train::TrainError),
    /// Decoding support (transition matrices) failed to load or save.
    #[error(transparent)]
    Infer(#[from] voxspec_infer::InferError),
    /// Reading a tensor back to the host failed.
    #[error("cannot read tensor data: {0}")]
    Readback(String),
}

/// `Result` with [`MultiStreamError`].
pub type Result<T> = std::result::Result<T, MultiStreamError>;
