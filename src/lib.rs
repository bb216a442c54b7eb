//! voxspec: codec-based language-model text-to-speech with a fast autoregressive stage.
//!
//! This root crate re-exports the workspace crates so downstream projects can depend on one
//! name, and hosts the end-to-end tests under `tests/`.

pub use voxspec_audio as audio;
pub use voxspec_data as data;
