//! voxspec-nn: the transformer core shared by every voxspec language model.
//!
//! - [`TransformerConfig`] → [`Transformer`]: a pre-norm stack, causal (decoder-only) or
//!   bidirectional, with RMSNorm or LayerNorm ([`NormKind`]), rotary or learned positions
//!   ([`PositionKind`]), GELU or SwiGLU feed-forward blocks ([`MlpKind`]) and a final norm.
//!   It maps hidden states `[batch, time, d_model]` to hidden states; token embeddings and
//!   output heads belong to the models built on it.
//! - [`Transformer::forward`]: the whole sequence at once (training, scoring, encoding), with an
//!   optional padding mask `[batch, time]` (true = real position).
//! - [`KvCache`]: preallocated keys and values `[batch, heads, capacity, head_dim]` per layer with
//!   a length per sequence, kept outside the model. [`Transformer::forward_cached`] runs a block
//!   of new positions (1 for plain decoding, γ + 1 for speculative verification) against it;
//!   [`KvCache::truncate`] / [`KvCache::truncate_seq`] roll sequences back in O(1), by different
//!   amounts if need be.
//! - [`weights`]: reading the config and safetensors weights of models trained elsewhere
//!   ([`weights::WeightFile`], [`weights::read_json`]), with errors naming file and tensor.
//!
//! ```no_run
//! use burn::tensor::{Device, Tensor};
//! use voxspec_nn::TransformerConfig;
//!
//! # fn main() -> Result<(), voxspec_nn::NnError> {
//! let device = Device::flex();
//! let model = TransformerConfig::tiny().init(&device)?;
//! let mut cache = model.new_cache(1, 64, &device)?;
//! let prompt = Tensor::<3>::zeros([1, 5, 32], &device);
//! let _hidden = model.forward_cached(prompt, &mut cache)?; // [1, 5, 32]
//! let draft = Tensor::<3>::zeros([1, 4, 32], &device);
//! let _scores = model.forward_cached(draft, &mut cache)?; // verify 4 drafted positions
//! cache.truncate(7); // 2 of them accepted
//! # Ok(())
//! # }
//! ```

pub mod activation;
pub mod attention;
pub mod bf16_gemm;
pub mod error;
pub mod fused_norm;
pub mod kv_cache;
pub mod linear;
pub mod mlp;
pub mod norm;
pub mod positions;
pub mod preset;
pub mod softmax;
pub mod transformer;
pub mod weights;

pub use attention::SelfAttention;
pub use error::{NnError, Result};
pub use kv_cache::KvCache;
pub use mlp::{Mlp, MlpKind};
pub use norm::{Norm, NormKind};
pub use positions::{PositionKind, Positions, Rotary};
pub use preset::Preset;
pub use transformer::{Block, Transformer, TransformerConfig};
