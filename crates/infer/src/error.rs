//! The error type of `voxspec-infer`. Every variant names the value or shape at fault.

/// Everything that can go wrong while decoding.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InferError {
    /// A setting is outside its valid range (`gamma = 0`, `theta` outside (−1, 1), ...).
    #[error("invalid setting {name} = {value}: {expected}")]
    InvalidSetting {
        /// The setting's name, as the CLI spells it.
        name: &'static str,
        /// The value received.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A logits buffer does not match its declared shape.
    #[error("logits buffer of {len} values does not match shape {shape:?}")]
    LogitsShape {
        /// `[batch, positions, heads, vocab]`.
        shape: [usize; 4],
        /// Values in the buffer.
        len: usize,
    },
    /// Two models that must agree (target and draft) do not.
    #[error("{what}: target has {target}, draft has {draft}")]
    ModelMismatch {
        /// What differs (e.g. "vocabulary size").
        what: &'static str,
        /// The target's value.
        target: String,
        /// The draft's value.
        draft: String,
    },
    /// A request is malformed (empty batch, empty block, token out of vocabulary, ...).
    #[error("invalid request: {detail}")]
    InvalidRequest {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// A file (transition statistics, ...) cannot be read, written or understood.
    #[error("{path}: {detail}")]
    File {
        /// The file.
        path: String,
        /// What is wrong with it (the tensor, field or value at fault).
        detail: String,
    },
    /// The model behind a [`crate::LanguageModel`] failed.
    #[error("model error: {0}")]
    Model(String),
}

/// `Result` with [`InferError`].
pub type Result<T> = std::result::Result<T, InferError>;
