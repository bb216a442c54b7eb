//! The error type of `voxspec-multistream`.

use std::path::PathBuf;

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
    /// A model directory could not be loaded.
    #[error("loading the {what} {}", dir.display())]
    Load {
        /// Its role: `codec`, `target`, `base LM`.
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<MultiStreamError>,
    },
    /// The training token store could not be opened.
    #[error("opening the train token store {}", dir.display())]
    TokenStore {
        /// The store's directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<DataError>,
    },
    /// No training utterance is left to train on.
    #[error("no training utterance has both a voice vector and (aligned) durations")]
    NoVoicedItems,
    /// A draft was given as the target of a draft.
    #[error("{} is itself a draft: give the target's run directory", dir.display())]
    DraftAsTarget {
        /// The directory given.
        dir: PathBuf,
    },
    /// A draft was given as the base LM of extra heads.
    #[error("{} is a draft: give a multi-stream LM's run directory", dir.display())]
    DraftAsBase {
        /// The directory given.
        dir: PathBuf,
    },
    /// A trained LM reads other text tokens or codes than the data has.
    #[error(
        "the {role} reads {text_vocab} text tokens and {codebook} codes; the data has \
         {data_text_vocab} and {data_codebook}"
    )]
    DataMismatch {
        /// `target` or `base LM`.
        role: &'static str,
        /// Its text vocabulary.
        text_vocab: usize,
        /// Its codebook size.
        codebook: usize,
        /// The tokenizer's vocabulary.
        data_text_vocab: usize,
        /// The token store's codebook size.
        data_codebook: usize,
    },
    /// An aligned LM is to be trained on utterances without alignments.
    #[error("the {role} is aligned; the training utterances need alignments")]
    NeedsAlignments {
        /// `target` or `base LM`.
        role: &'static str,
    },
}

/// `Result` with [`MultiStreamError`].
pub type Result<T> = std::result::Result<T, MultiStreamError>;
