//! The error type of `voxspec-draft`.

/// Everything that can go wrong when building or training a draft model.
#[derive(Debug, thiserror::Error)]
pub enum DraftError {
    /// The layer selection cannot make a draft of this target.
    #[error("invalid draft layers {spec}: {detail}")]
    Layers {
        /// The selection as given.
        spec: String,
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// The target model cannot have a draft trained on this data.
    #[error("{detail}")]
    Target {
        /// The target's directory.
        target: std::path::PathBuf,
        /// What does not fit, naming the directory.
        detail: String,
    },
    /// A training option is out of range.
    #[error("{detail}")]
    Option {
        /// The option and what is wrong with its value.
        detail: String,
    },
    /// The MTP model code refused the assembled parts.
    #[error(transparent)]
    Model(#[from] voxspec_mtp::MtpError),
    /// The transformer core refused the layer selection.
    #[error(transparent)]
    Nn(#[from] voxspec_nn::NnError),
}

/// `Result` with [`DraftError`].
pub type Result<T> = std::result::Result<T, DraftError>;
