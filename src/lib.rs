//! voxspec: codec-based language-model text-to-speech with a fast autoregressive stage.
//!
//! This root crate re-exports every library crate of the workspace (`voxspec::align`, `audio`, `data`,
//! `nn`, `train`, `codec`, `teacher`, `infer`, `mtp`, `multistream`, `draft`, `engine`, `tts`,
//! `eval`, `serve`) so downstream projects can depend on one name, and hosts the end-to-end tests
//! under `tests/`.

pub use voxspec_align as align;
pub use voxspec_audio as audio;
pub use voxspec_codec as codec;
pub use voxspec_data as data;
pub use voxspec_draft as draft;
pub use voxspec_engine as engine;
pub use voxspec_eval as eval;
pub use voxspec_infer as infer;
pub use voxspec_mtp as mtp;
pub use voxspec_multistream as multistream;
pub use voxspec_nn as nn;
pub use voxspec_serve as serve;
pub use voxspec_teacher as teacher;
pub use voxspec_train as train;
pub use voxspec_tts as tts;
