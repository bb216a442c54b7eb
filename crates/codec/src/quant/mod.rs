//! Quantizers: a ladder of small parts, each with `encode`/`decode`.
//!
//! ```text
//! EuclideanCodebook   K vectors, nearest-neighbour codes, EMA learning, k-means init,
//!   │                 dead-code restart                              (codebook.rs)
//! VectorQuantizer     optional projections, straight-through, commitment loss  (vq.rs)
//!   │
//! ResidualVectorQuantizer   n_q layers on successive residuals; any prefix of the layers
//!                           can be used at encode/decode time                  (rvq.rs)
//! ProductQuantizer          G groups of channels, one VectorQuantizer each      (pq.rs)
//!   │
//! OrderedProductQuantizer   pairs of PQ groups as streams, nested dropout       (opq.rs)
//! ```
//!
//! Every quantizer speaks the same shapes: latents `[batch, dim, frames]` in, codes
//! `[n_q, batch, frames]` out (`n_q` streams, the layout of the token stores), and its
//! `forward` returns a [`QuantizerOutput`]. Three implementations, so SoCodec's PQ / RQ / OPQ
//! comparison can be rerun: [`ResidualVectorQuantizer`] (RQ), [`ProductQuantizer`] (PQ: groups
//! of channels, one [`VectorQuantizer`] each) and [`OrderedProductQuantizer`] (OPQ: pairs of
//! sub-codebooks as streams, token `i0 + K·i1`, nested dropout in training), all from the same
//! [`VectorQuantizer`] and [`EuclideanCodebook`] with their EMA updates.

mod codebook;
mod opq;
mod pq;
mod rvq;
mod vq;

pub use codebook::{
    CodebookSettings, CodebookUpdate, EuclideanCodebook, EuclideanCodebookConfig, SplitMix64,
};
pub use opq::{OrderedProductQuantizer, OrderedProductQuantizerConfig, pair_token, split_token};
pub use pq::{ProductQuantizer, ProductQuantizerConfig};
pub use rvq::{ResidualVectorQuantizer, ResidualVectorQuantizerConfig};
pub use vq::{VectorQuantizer, VectorQuantizerConfig, VqOutput};

pub(crate) use codebook::replace_buffer;

use burn::tensor::{Int, Tensor};

use crate::error::CodecError;

/// Checks that `start..start + count` is a non-empty range of the `available` streams.
pub(crate) fn check_streams(
    start: usize,
    count: usize,
    available: usize,
) -> Result<(), CodecError> {
    if count == 0 || start + count > available {
        return Err(CodecError::QuantizerLayers {
            start,
            count,
            available,
        });
    }
    Ok(())
}

/// Checks that `x` is `[batch, dim, frames]`.
pub(crate) fn check_latents(x: &Tensor<3>, dim: usize) -> Result<(), CodecError> {
    let dims = x.dims();
    if dims[1] != dim {
        return Err(CodecError::QuantizerShape {
            what: "quantizer input [batch, dim, frames]",
            expected: vec![dims[0], dim, dims[2]],
            found: dims.to_vec(),
        });
    }
    Ok(())
}

/// Codebook usage of one quantizer layer on one batch (tensors, so reading them is the
/// caller's choice).
#[derive(Debug, Clone)]
pub struct QuantizerMetrics {
    /// `exp(entropy)` of the empirical code distribution `[1]` (between 1 and `K`).
    pub perplexity: Tensor<1>,
    /// Fraction of the `K` codes used at least once `[1]`.
    pub usage: Tensor<1>,
}

/// What a quantizer's `forward` returns.
#[derive(Debug, Clone)]
pub struct QuantizerOutput {
    /// Straight-through quantized latents `[batch, dim, frames]`.
    pub quantized: Tensor<3>,
    /// Codes `[n_q, batch, frames]`.
    pub codes: Tensor<3, Int>,
    /// Commitment loss `[1]` (mean over the streams used).
    pub commitment_loss: Tensor<1>,
    /// The straight-through output of each stream `[batch, dim, frames]` (stream 0 is what
    /// semantic distillation regresses to the teacher).
    pub layer_quantized: Vec<Tensor<3>>,
    /// Usage metrics per stream.
    pub metrics: Vec<QuantizerMetrics>,
}

/// The interface every quantizer implements, so codecs can hold any of them.
pub trait Quantizer {
    /// Number of code streams `n_q`.
    fn num_streams(&self) -> usize;

    /// Latent dimension.
    fn latent_dim(&self) -> usize;

    /// Codebook size of each stream (a code lies in `0..codebook_size`).
    fn stream_codebook_size(&self) -> usize;

    /// Quantizes with the first `n_q` streams.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`; see [`QuantizerOutput`]
    ///
    /// # Errors
    /// On a bad `n_q` or a wrong latent width.
    fn quantize(&self, x: Tensor<3>, n_q: usize) -> Result<QuantizerOutput, CodecError>;

    /// Codes from the first `n_q` streams.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]` → `[n_q, batch, frames]`
    ///
    /// # Errors
    /// On a bad `n_q` or a wrong latent width.
    fn encode_codes(&self, x: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError>;

    /// Latents from the first `m` streams' codes.
    ///
    /// # Shapes
    /// - `codes`: `[m, batch, frames]` → `[batch, dim, frames]`
    ///
    /// # Errors
    /// When `m` is 0 or exceeds the streams.
    fn decode_codes(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, CodecError>;
}

impl Quantizer for ResidualVectorQuantizer {
    fn num_streams(&self) -> usize {
        self.n_q()
    }

    fn latent_dim(&self) -> usize {
        self.dim()
    }

    fn stream_codebook_size(&self) -> usize {
        self.codebook_size()
    }

    fn quantize(&self, x: Tensor<3>, n_q: usize) -> Result<QuantizerOutput, CodecError> {
        self.forward(x, n_q)
    }

    fn encode_codes(&self, x: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError> {
        self.encode(x, n_q)
    }

    fn decode_codes(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, CodecError> {
        self.decode(codes)
    }
}
