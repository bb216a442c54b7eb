//! voxspec-codec: the audio side of voxspec's codec language model. The semantic teachers it
//! distils from, and their feature stores, are in `voxspec-teacher`.
//!
//! - Quantizers ([`quant`]): Euclidean codebook (EMA, k-means init, dead-code restart) →
//!   vector quantizer → residual VQ, each returning a [`QuantizerOutput`].
//! - The SpeechTokenizer-style codec ([`speechtokenizer`]): SEANet encoder/decoder with a
//!   BiLSTM, RVQ, semantic distillation, its losses ([`losses`]) and training task, and a loader
//!   for the official package's checkpoints.
//! - The SoCodec-style codec ([`socodec`]): teacher features → ordered token streams (OPQ, PQ
//!   or RQ) at a long frame shift, a global voice vector, log-mel out; its training task.
//! - The Vocos-style vocoder and Griffin-Lim ([`vocoder`]); [`Vocoder`] turns host log-mels (or
//!   audio, analysis–resynthesis) into samples (`checkpoints/vocoder-minitts` is a trained one).
//! - The codes → log-mel decoder ([`mel_decoder`]): the RVQ codec's codes rendered as the
//!   vocoder's log-mel, then by the vocoder or Griffin-Lim ([`MelSpeech`]).
//! - Quality metrics of a resynthesis ([`metrics`], [`voiced`]): an MFCC-based mel-cepstral
//!   distortion, and the same on voiced frames with the F0 error there.

pub mod error;
pub mod losses;
pub mod mel_decoder;
pub mod metrics;
pub mod quant;
pub mod socodec;
pub mod speechtokenizer;
pub mod vocoder;
pub mod voiced;

pub use error::CodecError;
pub use error::{MetricsError, VocoderError};
pub use mel_decoder::{MelDecoder, MelDecoderConfig, MelSpeech, load_mel_decoder};
pub use metrics::{McdConfig, McdScore, MelCepstralDistortion};
pub use quant::{
    EuclideanCodebook, OrderedProductQuantizer, ProductQuantizer, Quantizer, QuantizerMetrics,
    QuantizerOutput, ResidualVectorQuantizer, VectorQuantizer,
};
pub use socodec::{
    QuantizerKind, SOCODEC_KIND, SoCodec, SoCodecConfig, load_socodec, save_socodec,
};
pub use speechtokenizer::{
    CODEC_KIND, CodecOutput, DecodeStream, SpeechTokenizer, SpeechTokenizerConfig, load_codec,
    read_codec_config, save_codec,
};
pub use vocoder::{
    GriffinLimConfig, TensorStft, Vocoder, VocoderTask, Vocos, VocosConfig, griffin_lim,
    griffin_lim_from_log_mel, griffin_lim_resynthesize, load_vocoder, save_vocoder,
    vocoder_log_mel,
};
pub use voiced::{VoicedMetrics, VoicedScore};
