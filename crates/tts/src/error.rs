//! Errors of the pipeline: each names the model directory, file, text or decoder at fault.

use std::path::PathBuf;

/// Errors of loading, decoding, vocoding and benchmarking.
#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    /// A model, its tokenizer, the transition matrix or a draft could not be loaded.
    #[error("loading {what} {}", path.display())]
    Load {
        /// What was being loaded ("the AR model", "the codec", …).
        what: &'static str,
        /// Its directory or file.
        path: PathBuf,
        /// The loader's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The loaded models do not fit together (codebooks, code layers).
    #[error("{0}")]
    Incompatible(String),
    /// The text cannot be spoken (empty, unknown characters, too long for the context).
    #[error("{0}")]
    Text(String),
    /// The text needs more positions than the AR model's context holds (long-form synthesis
    /// splits such a sentence into clauses).
    #[error("{0}")]
    TooLong(String),
    /// A setting is out of range (the message names it).
    #[error("{0}")]
    Config(String),
    /// A voice prompt cannot be used.
    #[error("the prompt {}: {reason}", path.display())]
    Prompt {
        /// The reference recording.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A decoder cannot be built from its specification and parts.
    #[error("{spec}: {reason}")]
    Decoder {
        /// The decoder's label ([`crate::DecoderSpec::label`]).
        spec: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// A stage of the pipeline failed.
    #[error("{stage}")]
    Stage {
        /// The stage ("the NAR stage", "the codec decoder", …).
        stage: &'static str,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Reading a tensor back from the device failed.
    #[error("cannot read {what} back from the device: {reason}")]
    TensorRead {
        /// What was being read.
        what: &'static str,
        /// The backend's message.
        reason: String,
    },
    /// A benchmark setting or input is invalid.
    #[error("{what}: {reason}")]
    Bench {
        /// The setting or input.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// A multi-stream LM names no codec in its `config.json` and none was given.
    #[error("{} does not name its codec: pass --codec <DIR>", model.display())]
    NoCodec {
        /// The LM directory.
        model: PathBuf,
    },
    /// The vocoder of a multi-stream pipeline cannot be loaded or does not take the codec's
    /// log-mel.
    #[error(
        "the vocoder {} (train one with `voxspec vocoder train` on the codec's mel settings, \
         or pass --griffin-lim)",
        path.display()
    )]
    Vocoder {
        /// The vocoder directory.
        path: PathBuf,
        /// The loader's or the check's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A multi-stream LM was asked to speak without a voice.
    #[error(
        "a multi-stream LM speaks with the voice of a reference recording: give one (a \
         recording, or a directory of recordings of one voice)"
    )]
    NoVoice,
    /// The multi-stream LM ended speech before its first frame.
    #[error("the LM ended speech before its first frame")]
    NoFrames,
    /// The multi-stream LM rejected its input.
    #[error(transparent)]
    MultiStream {
        /// Its error.
        #[from]
        source: voxspec_multistream::MultiStreamError,
    },
    /// The decoders or the models' own checks failed.
    #[error(transparent)]
    Infer(#[from] voxspec_infer::InferError),
    /// The AR or NAR model rejected its input.
    #[error(transparent)]
    Mtp(#[from] voxspec_mtp::MtpError),
    /// The tokenizer or a manifest failed.
    #[error(transparent)]
    Data(#[from] voxspec_data::DataError),
    /// Reading, resampling or writing audio failed.
    #[error(transparent)]
    Audio(#[from] voxspec_audio::AudioError),
    /// The codec failed.
    #[error(transparent)]
    Codec(#[from] voxspec_codec::CodecError),
    /// The CTC teacher (the benchmark's judge) failed.
    #[error(transparent)]
    Teacher(#[from] voxspec_teacher::TeacherError),
}

impl TtsError {
    /// A [`TtsError::Load`] of `what` at `path`.
    pub(crate) fn load<E: std::error::Error + Send + Sync + 'static>(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(E) -> Self {
        let path = path.to_path_buf();
        move |e| TtsError::Load {
            what,
            path,
            source: Box::new(e),
        }
    }

    /// A [`TtsError::Stage`] for `stage`.
    pub(crate) fn stage<E: std::error::Error + Send + Sync + 'static>(
        stage: &'static str,
    ) -> impl FnOnce(E) -> Self {
        move |e| TtsError::Stage {
            stage,
            source: Box::new(e),
        }
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, TtsError>;
