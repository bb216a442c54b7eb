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
    /// A training option is out of range.
    #[error("{detail}")]
    Option {
        /// The option and what is wrong with its value.
        detail: String,
    },
    /// An aligned run was asked for, but some training utterances have no durations.
    #[error(
        "--alignment on: {missing} of {total} training utterances have no durations (they need a \
         phoneme tokenizer and alignments in the manifest: `voxspec prepare` with TextGrids)"
    )]
    Unaligned {
        /// Training utterances without durations.
        missing: usize,
        /// Training utterances.
        total: usize,
    },
    /// The head weights are not one per head.
    #[error("--head-weights has {given} values for {heads} heads")]
    HeadWeightCount {
        /// Weights given.
        given: usize,
        /// Heads of the model.
        heads: usize,
    },
    /// A head weight is negative or not finite.
    #[error("--head-weights must be finite and non-negative")]
    HeadWeightValue,
    /// The NAR model cannot model this many RVQ layers of the token store.
    #[error("--n-q {n_q}: the token store has {layers} layers and the NAR stage needs at least 2")]
    NarLayers {
        /// Layers asked for.
        n_q: usize,
        /// Layers in the token store.
        layers: usize,
    },
    /// A file or directory could not be read, written, listed or copied.
    #[error("{action}")]
    Io {
        /// What was being done, naming the path(s).
        action: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A safetensors file could not be read, converted or written.
    #[error("{action}")]
    Safetensors {
        /// What was being done, naming the file.
        action: String,
        /// The safetensors error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A model directory's `config.json` is not JSON.
    #[error("parsing {}", path.display())]
    ConfigJson {
        /// The file.
        path: std::path::PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A model directory cannot be exported.
    #[error("{detail}")]
    Export {
        /// What is wrong, naming the directory.
        detail: String,
    },
    /// A file to ship with an export (transitions, groups) does not load.
    #[error("checking {}", path.display())]
    Extra {
        /// The file.
        path: std::path::PathBuf,
        /// Why it does not load.
        #[source]
        source: voxspec_infer::InferError,
    },
    /// Writing a file failed.
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
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
