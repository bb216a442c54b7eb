//! voxspec-teacher: the semantic teachers whose frame features a codec distils into its first
//! quantizer, and the speech recogniser that scores intelligibility.
//!
//! - Semantic teachers ([`SemanticTeacher`]): HuBERT ([`Hubert`], [`HubertTeacher`]), which
//!   loads Hugging Face checkpoints such as `facebook/hubert-base-ls960`, and the supervised CTC
//!   teacher trained here ([`ctc`], [`CtcTeacher`]), which also transcribes speech for the
//!   character error rate ([`cer`]) and identifies sentences by forced choice
//!   ([`ctc::ForcedChoice`]).
//! - Teacher features of a corpus are stored as safetensors shards ([`feature_store`]), the
//!   offline distillation target of the codec in `voxspec-codec`: computed by either kind of
//!   teacher ([`AnyTeacher`], [`extract_split`]) or read from forced alignments
//!   ([`write_phone_split`]).
//!
//! ```no_run
//! use burn::tensor::Device;
//! use voxspec_teacher::{Hubert, HubertTeacher, LayerSelection, SemanticTeacher};
//!
//! # fn main() -> Result<(), voxspec_teacher::TeacherError> {
//! let device = Device::flex();
//! let hubert = Hubert::load("models/hubert-base-ls960", &device)?;
//! // SpeechTokenizer's teacher: the mean of all hidden states, 768-d at 50 Hz.
//! let teacher = HubertTeacher::new(hubert, LayerSelection::MeanOfAll)?;
//! let features = teacher.features(&vec![0.0; 16000])?; // [49, 768]
//! # Ok(())
//! # }
//! ```

pub mod any;
pub mod ctc;
pub mod error;
pub mod extract;
pub mod feature_store;
pub mod hubert;
pub mod phones;
pub mod teacher;

pub use any::{AnyTeacher, HUBERT_KIND, is_ctc_dir};
pub use ctc::{
    CtcModel, CtcModelConfig, CtcTask, CtcTaskConfig, CtcTeacher, ErrorCounts, FrontendConfig, cer,
    corpus_cer,
};
pub use error::TeacherError;
pub use extract::{SplitFeatures, extract_split};
pub use feature_store::{FeatureStoreMeta, FeatureStoreReader, FeatureStoreWriter, Features};
pub use hubert::{FeatExtractNorm, HiddenAct, Hubert, HubertConfig, HubertOutput, HubertTeacher};
pub use phones::{
    PHONE_DIM, PHONES_KIND, PhoneSplit, phone_code, phone_features, phones_meta, write_phone_split,
};
pub use teacher::{LayerSelection, SemanticTeacher};
