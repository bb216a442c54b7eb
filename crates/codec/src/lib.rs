//! voxspec-codec: the audio side of voxspec's codec language model.
//!
//! - Semantic teachers ([`SemanticTeacher`]): HuBERT ([`Hubert`], [`HubertTeacher`]), which
//!   loads Hugging Face checkpoints such as `facebook/hubert-base-ls960`, and the supervised CTC
//!   teacher trained here ([`ctc`], [`CtcTeacher`]), which also transcribes speech for the
//!   character error rate ([`cer`]). Teacher features of a corpus are stored as safetensors
//!   shards ([`feature_store`]).
//! - Quantizers ([`quant`]): Euclidean codebook (EMA, k-means init, dead-code restart) →
//!   vector quantizer → residual VQ, each returning a [`QuantizerOutput`].
//! - The SpeechTokenizer-style codec ([`speechtokenizer`]): SEANet encoder/decoder with a
//!   BiLSTM, RVQ, semantic distillation, its losses ([`losses`]) and training task, and a loader
//!   for the official package's checkpoints.
//! - The Vocos-style vocoder and Griffin-Lim ([`vocoder`]).
//! - Quality metrics of a resynthesis ([`metrics`]): an MFCC-based mel-cepstral distortion.
//!
//! ```no_run
//! use burn::tensor::Device;
//! use voxspec_codec::{Hubert, HubertTeacher, LayerSelection, SemanticTeacher};
//!
//! # fn main() -> Result<(), voxspec_codec::CodecError> {
//! let device = Device::flex();
//! let hubert = Hubert::load("models/hubert-base-ls960", &device)?;
//! // SpeechTokenizer's teacher: the mean of all hidden states, 768-d at 50 Hz.
//! let teacher = HubertTeacher::new(hubert, LayerSelection::MeanOfAll)?;
//! let features = teacher.features(&vec![0.0; 16000])?; // [49, 768]
//! # Ok(())
//! # }
//! ```

pub mod ctc;
pub mod error;
pub mod feature_store;
pub mod hubert;
pub mod losses;
pub mod metrics;
pub mod quant;
pub mod speechtokenizer;
pub mod teacher;
pub mod vocoder;

pub use ctc::{
    CtcModel, CtcModelConfig, CtcTask, CtcTaskConfig, CtcTeacher, ErrorCounts, FrontendConfig, cer,
    corpus_cer,
};
pub use error::CodecError;
pub use error::{MetricsError, VocoderError};
pub use feature_store::{FeatureStoreMeta, FeatureStoreReader, FeatureStoreWriter, Features};
pub use hubert::{FeatExtractNorm, HiddenAct, Hubert, HubertConfig, HubertOutput, HubertTeacher};
pub use metrics::{McdConfig, McdScore, MelCepstralDistortion};
pub use quant::{
    EuclideanCodebook, Quantizer, QuantizerMetrics, QuantizerOutput, ResidualVectorQuantizer,
    VectorQuantizer,
};
pub use speechtokenizer::{
    CODEC_KIND, CodecOutput, SpeechTokenizer, SpeechTokenizerConfig, load_codec, save_codec,
};
pub use teacher::{LayerSelection, SemanticTeacher};
pub use vocoder::{
    GriffinLimConfig, TensorStft, VocoderTask, Vocos, VocosConfig, griffin_lim,
    griffin_lim_from_log_mel,
};
