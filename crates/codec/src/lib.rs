//! voxspec-codec: the audio side of voxspec's codec language model.
//!
//! This crate will hold the quantizers, the neural codecs, the semantic teachers their first
//! quantizer is distilled from, and the vocoder. This release has the semantic teacher
//! interface ([`SemanticTeacher`]) and two implementations: HuBERT ([`Hubert`],
//! [`HubertTeacher`]), which loads Hugging Face checkpoints such as
//! `facebook/hubert-base-ls960` (`config.json` + `model.safetensors`), and the supervised CTC
//! teacher trained here ([`ctc`], [`CtcTeacher`]), which also transcribes speech for the
//! character error rate ([`cer`]). Teacher features of a corpus are stored as safetensors
//! shards ([`feature_store`]).
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
pub mod quant;
pub mod speechtokenizer;
pub mod teacher;

pub use ctc::{
    CtcModel, CtcModelConfig, CtcTask, CtcTaskConfig, CtcTeacher, ErrorCounts, FrontendConfig, cer,
    corpus_cer,
};
pub use error::CodecError;
pub use feature_store::{FeatureStoreMeta, FeatureStoreReader, FeatureStoreWriter, Features};
pub use hubert::{FeatExtractNorm, HiddenAct, Hubert, HubertConfig, HubertOutput, HubertTeacher};
pub use quant::{
    EuclideanCodebook, Quantizer, QuantizerMetrics, QuantizerOutput, ResidualVectorQuantizer,
    VectorQuantizer,
};
pub use speechtokenizer::{CodecOutput, SpeechTokenizer, SpeechTokenizerConfig};
pub use teacher::{LayerSelection, SemanticTeacher};
