//! voxspec-codec: the audio side of voxspec's codec language model.
//!
//! This crate will hold the quantizers, the neural codecs, the semantic teachers their first
//! quantizer is distilled from, and the vocoder. This release has the semantic teacher
//! interface ([`SemanticTeacher`]) and its first implementation, HuBERT
//! ([`Hubert`], [`HubertTeacher`]), which loads Hugging Face checkpoints such as
//! `facebook/hubert-base-ls960` (`config.json` + `model.safetensors`).
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

pub mod error;
pub mod hubert;
pub mod teacher;
pub mod vocoder;

pub use error::CodecError;
pub use error::VocoderError;
pub use hubert::{FeatExtractNorm, HiddenAct, Hubert, HubertConfig, HubertOutput, HubertTeacher};
pub use teacher::{LayerSelection, SemanticTeacher};
pub use vocoder::{
    GriffinLimConfig, TensorStft, VocoderTask, Vocos, VocosConfig, griffin_lim,
    griffin_lim_from_log_mel,
};
