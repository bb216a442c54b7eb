//! voxspec-engine: a native CPU inference engine for voxspec's AR model with MTP heads and its
//! NAR model: f32 arithmetic over f32 or bf16 weights.
//!
//! - [`NativeMtp`]: the model built from a loaded Burn `voxspec_mtp::MtpModel` (parameters
//!   copied out once, linear weights packed in column panels) or from a model directory
//!   ([`NativeMtp::load`]); plain and aligned (phone-track) models, RMSNorm or LayerNorm,
//!   rotary or learned positions, SwiGLU or GELU, the Medusa-style MTP heads.
//! - It implements `voxspec_infer::LanguageModel` with [`NativeCache`]: a preallocated KV cache
//!   per layer, per-sequence lengths, O(1) truncate, ragged `extend` without padding, and
//!   scratch buffers reused from step to step.
//! - [`NativeNar`]: the NAR model (code layers 2..N) on the same stack, bidirectional, one pass
//!   per layer.
//! - [`matmul`]: small-M products (M ≤ 16 new tokens) that read each weight once for all rows,
//!   split over the threads by output columns, with AVX-512, AVX2 and portable micro-kernels
//!   chosen at run time, over f32 or bf16 weights ([`WeightFormat`]).
//! - bf16 weights: [`NativeMtp::from_burn_with`] / [`NativeNar::from_burn_with`] (and `load_with`)
//!   store every linear weight (transformer layers, MTP / NAR heads) as bfloat16, rounded to
//!   nearest even at load; embedding tables, norms, biases, the KV cache and all arithmetic stay
//!   f32. A step reads half the bytes. Tested in `tests/bf16_parity.rs`: logits within 4 % of
//!   the logits' standard deviation of the f32 engine (measured ≤ 1.15 %), greedy decoding token
//!   for token on the tiny preset, ≥ 98 % teacher-forced greedy agreement on the small preset
//!   (measured 99.4–100 %).
//!
//! Parity with the Burn model (logits within 1e-4 — measured ≤ 1e-6 — for prefill, single-token
//! and ragged steps, after truncation; greedy AR and MTP decoding token for token) is tested in
//! `tests/parity.rs` for a plain, an aligned and a GPT-2-style model.
//!
//! # Measured (2-core AMD EPYC Zen 4, AVX-512, the machine shared with another job: ±20 % noise)
//!
//! Small-M products, µs per `[M, K] × [K, N]` cycled over a weight set past L3 (28 matrices of
//! 1024 × 1024, 117 MB) and one inside it (4 of 256 × 1024); `examples/small_m.rs`, one run. The
//! `gemm` crate 0.19 (what Burn's flex backend calls; `x86-v4` on) has a fast gemv for M = 1
//! but runs M ≥ 2 through its packed kernel, which costs 2–4x M = 1 before M = 8; the engine's
//! panel kernels read the weight once for all rows, so they are used for every M:
//!
//! | M | engine, 1024² from memory | gemm, 1024² (1 thread / 2) | engine, 256 × 1024 in L3 (1 thread) | gemm, 256 × 1024 (1 thread) |
//! |---|---|---|---|---|
//! | 1 | 148 | 240 / 384 | 13 | 14 |
//! | 2 | 188 | 422 / 500 | 16 | 25 |
//! | 4 | 206 | 458 / 492 | 20 | 23 |
//! | 8 | 223 | 657 / 717 | 38 | 52 |
//! | 16 | 403 | 771 / 825 | 76 | 79 |
//!
//! A second thread pays only for weights that stream from memory (two threads read ≈ 27 GB/s,
//! one ≈ 20): products with less than 4 MB of weights and little work stay on one thread.
//!
//! One cached forward over k new tokens at 200 cached positions (`voxspec bench forward
//! --engine burn,native`, ms, one run per model):
//!
//! | model | engine | k = 1 | k = 2 | k = 4 | k = 8 | cost(8)/cost(1) |
//! |---|---|---|---|---|---|---|
//! | main job's aligned AR (d 256, 4 layers, 6.7 M) | Burn | 0.891 | 1.356 | 1.717 | 2.413 | 2.71 |
//! | | native | 0.404 | 0.479 | 0.622 | 1.120 | 2.77 |
//! | base preset, random (d 1024, 12 layers, 203 M) | Burn | 37.0 | 77.1 | 89.9 | 132.3 | 3.57 |
//! | | native | 30.4 | 33.7 | 35.4 | 44.3 | 1.46 |
//!
//! The base model's one-token step reads 810 MB of f32 weights in 30.4 ms: 26.6 GB/s, 1.05x the
//! ≈ 29 ms floor at 28 GB/s. The small model lives in L3; its larger k cost is arithmetic and
//! attention on one core.

pub mod attention;
pub mod bandwidth;
pub mod cache;
pub mod error;
pub mod lm;
pub mod matmul;
pub mod model;
pub mod nar;
pub mod ops;
mod stack;

pub use bandwidth::read_bandwidth_gbs;
pub use cache::NativeCache;
pub use error::{EngineError, Result};
pub use matmul::{Kernel, PackedLinear, WeightFormat};
pub use model::NativeMtp;
pub use nar::NativeNar;
