//! voxspec-engine: a native f32 CPU inference engine for voxspec's AR model with MTP heads.
//!
//! - [`NativeMtp`]: the model built from a loaded Burn `voxspec_mtp::MtpModel` (parameters
//!   copied out once, linear weights packed in column panels) or from a model directory
//!   ([`NativeMtp::load`]); plain and aligned (phone-track) models, RMSNorm or LayerNorm,
//!   rotary or learned positions, SwiGLU or GELU, the Medusa-style MTP heads.
//! - It implements `voxspec_infer::LanguageModel` with [`NativeCache`]: a preallocated KV cache
//!   per layer, per-sequence lengths, O(1) truncate, ragged `extend` without padding, and
//!   scratch buffers reused from step to step.
//! - [`matmul`]: small-M products (M ≤ 16 new tokens) that read each weight once for all rows,
//!   split over the threads by output columns, with AVX-512, AVX2 and portable micro-kernels
//!   chosen at run time.
//!
//! Parity with the Burn model (logits within 1e-4, greedy decoding token for token) is tested
//! in `tests/parity.rs`.

pub mod attention;
pub mod cache;
pub mod error;
pub mod lm;
pub mod matmul;
pub mod model;
pub mod ops;

pub use cache::NativeCache;
pub use error::{EngineError, Result};
pub use matmul::{Kernel, PackedLinear};
pub use model::NativeMtp;
