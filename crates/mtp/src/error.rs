//! The error type of `voxspec-mtp`.

use voxspec_nn::NnError;

/// Everything that can go wrong when building, running or training an MTP model.
#[derive(Debug, thiserror::Error)]
pub enum MtpError {
    /// The configuration cannot describe a model.
    #[error("invalid MTP config: {detail}")]
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
    /// An input is malformed (empty text, a sequence past the model's length, ...).
    #[error("invalid input: {detail}")]
    InvalidInput {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// The transformer core failed.
    #[error(transparent)]
    Nn(#[from] NnError),
    /// Saving or loading a model directory failed.
    #[error(transparent)]
    Files(#[from] voxspec_train::TrainError),
    /// Reading a tensor back to the host failed.
    #[error("cannot read tensor data: {0}")]
    Readback(String),
}

/// `Result` with [`MtpError`].
pub type Result<T> = std::result::Result<T, MtpError>;
