//! Ordered product quantization (Guo et al., "SoCodec: A Semantic-Ordered Multi-Stream Speech
//! Codec for Efficient Language Model Based Text-to-Speech Synthesis", §3.2): a product
//! quantizer whose sub-codebooks are paired into streams, trained with stream-wise nested
//! dropout so that the streams come out ordered by importance.
//!
//! ```text
//! 2S sub-codebooks of K₀ (even) and K₁ (odd) entries, stream s = sub-codebooks (2s, 2s + 1)
//! stream token  u = i₀ + K₀ · i₁       (two 128-entry codebooks: 16,384 tokens per stream)
//! decoding      i₀ = u mod K₀, i₁ = u div K₀
//! nested dropout (training only): per utterance draw b uniform in 1..=S, keep streams < b,
//!               zero the channels of the others
//! ```
//!
//! Stream `s` owns the contiguous channels `[2s·D/2S, (2s + 2)·D/2S)`. Decoding from the first
//! `b` streams (the rest zeroed) is [`OrderedProductQuantizer::decode`] on `b` rows of tokens.
//! Both sub-codebooks of a pair have the same size here (`K₀ = K₁ = K`).

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::codebook::{CodebookUpdate, EuclideanCodebookConfig, SplitMix64};
use super::pq::{ProductQuantizer, ProductQuantizerConfig};
use super::{Quantizer, QuantizerMetrics, QuantizerOutput};
use crate::error::CodecError;

/// Configuration of an [`OrderedProductQuantizer`].
#[derive(Config, Debug)]
pub struct OrderedProductQuantizerConfig {
    /// Latent dimension `D` (a multiple of `2 · streams`).
    pub dim: usize,
    /// Number of streams `S` (each a pair of sub-codebooks).
    pub streams: usize,
    /// Each sub-codebook (its `dim` is set to `D / 2S`); SoCodec uses 128 entries.
    #[config(default = "EuclideanCodebookConfig::new().with_codebook_size(128)")]
    pub codebook: EuclideanCodebookConfig,
    /// Weight of the commitment loss.
    #[config(default = 1.0)]
    pub commitment_weight: f64,
}

impl OrderedProductQuantizerConfig {
    /// Builds the `2S` sub-codebooks.
    ///
    /// # Errors
    /// [`CodecError::InvalidConfig`] when `streams` is 0 or `2 · streams` does not divide `dim`.
    pub fn init(&self, device: &Device) -> Result<OrderedProductQuantizer, CodecError> {
        if self.streams == 0 {
            return Err(CodecError::InvalidConfig {
                field: "streams",
                reason: "an ordered product quantizer needs at least one stream".into(),
            });
        }
        let pq = ProductQuantizerConfig::new(self.dim, 2 * self.streams)
            .with_codebook(self.codebook.clone())
            .with_commitment_weight(self.commitment_weight)
            .init(device)?;
        Ok(OrderedProductQuantizer { pq })
    }
}

/// An ordered product quantizer (see the module documentation).
#[derive(Module, Debug)]
pub struct OrderedProductQuantizer {
    /// The `2S` sub-codebooks, stream `s` holding groups `2s` and `2s + 1`.
    pub pq: ProductQuantizer,
}

/// The stream token of sub-codes `(i0, i1)` over a first codebook of `k0` entries.
pub fn pair_token(i0: i64, i1: i64, k0: i64) -> i64 {
    i0 + k0 * i1
}

/// The sub-codes `(i0, i1)` of stream token `u` over a first codebook of `k0` entries.
pub fn split_token(u: i64, k0: i64) -> (i64, i64) {
    (u.rem_euclid(k0), u.div_euclid(k0))
}

impl OrderedProductQuantizer {
    /// Number of streams `S`.
    pub fn n_streams(&self) -> usize {
        self.pq.n_groups() / 2
    }

    /// Latent dimension `D`.
    pub fn dim(&self) -> usize {
        self.pq.dim()
    }

    /// Entries of one sub-codebook `K`.
    pub fn sub_codebook_size(&self) -> usize {
        self.pq.codebook_size()
    }

    /// Tokens of one stream, `K²`.
    pub fn stream_vocab(&self) -> usize {
        self.sub_codebook_size().pow(2)
    }

    /// Sub-codes `[2m, batch, frames]` → stream tokens `[m, batch, frames]`.
    fn pair(&self, sub: Tensor<3, Int>) -> Tensor<3, Int> {
        let [g, b, t] = sub.dims();
        let k0 = self.sub_codebook_size() as i64;
        // [m, 2, batch, frames]: index 0 the even sub-codebook, 1 the odd one
        let sub = sub.reshape([g / 2, 2, b, t]);
        let i0 = sub.clone().narrow(1, 0, 1).reshape([g / 2, b, t]);
        let i1 = sub.narrow(1, 1, 1).reshape([g / 2, b, t]);
        i0 + i1.mul_scalar(k0)
    }

    /// Stream tokens `[m, batch, frames]` → sub-codes `[2m, batch, frames]`.
    fn split(&self, tokens: Tensor<3, Int>) -> Tensor<3, Int> {
        let [m, b, t] = tokens.dims();
        let k0 = self.sub_codebook_size() as i64;
        let i0 = tokens.clone().remainder_scalar(k0).reshape([m, 1, b, t]);
        let i1 = tokens.div_scalar(k0).reshape([m, 1, b, t]);
        Tensor::cat(vec![i0, i1], 1).reshape([2 * m, b, t])
    }

    fn check_streams(&self, count: usize) -> Result<(), CodecError> {
        super::check_streams(0, count, self.n_streams())
    }

    /// Quantizes `x` with the first `n_q` streams (no dropout: inference, and training
    /// without it); the other streams' channels are zero.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - returns: `quantized` `[batch, dim, frames]`, stream tokens `codes`
    ///   `[n_q, batch, frames]`, `commitment_loss` `[1]`, per stream its quantized output
    ///   (zero outside its channels) and the metrics of its tokens
    ///
    /// # Errors
    /// When `n_q` is 0 or exceeds the streams, or `dim` is wrong.
    pub fn forward(&self, x: Tensor<3>, n_q: usize) -> Result<QuantizerOutput, CodecError> {
        self.check_streams(n_q)?;
        let out = self.pq.forward(x, 2 * n_q)?;
        let codes = self.pair(out.codes);
        let [_, b, t] = codes.dims();
        let layer_quantized = out
            .layer_quantized
            .chunks(2)
            .map(|pair| pair[0].clone() + pair[1].clone())
            .collect();
        let metrics = (0..n_q)
            .map(|s| {
                let tokens = codes.clone().narrow(0, s, 1).reshape([b * t]);
                QuantizerMetrics::of_codes(tokens, self.stream_vocab())
            })
            .collect();
        Ok(QuantizerOutput {
            quantized: out.quantized,
            codes,
            commitment_loss: out.commitment_loss,
            layer_quantized,
            metrics,
        })
    }

    /// Training forward with stream-wise nested dropout: all streams are quantized, then
    /// utterance `i` keeps streams `0..keep[i]` with `keep[i]` drawn uniformly from `1..=S`
    /// (from `rng`), the channels of the others zeroed. Returns the output and `keep`.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`; `quantized` as in [`Self::forward`] with all `S` streams
    ///
    /// # Errors
    /// As [`Self::forward`].
    pub fn forward_nested(
        &self,
        x: Tensor<3>,
        rng: &mut SplitMix64,
    ) -> Result<(QuantizerOutput, Vec<usize>), CodecError> {
        let mut out = self.forward(x, self.n_streams())?;
        let [batch, _, _] = out.quantized.dims();
        let s = self.n_streams() as u64;
        let keep: Vec<usize> = (0..batch)
            .map(|_| (rng.next_u64() % s) as usize + 1)
            .collect();
        out.quantized = self.keep_streams(out.quantized, &keep)?;
        Ok((out, keep))
    }

    /// Zeroes, in utterance `i` of `quantized`, the channels of streams `keep[i]..S`.
    ///
    /// # Shapes
    /// - `quantized`: `[batch, dim, frames]`, `keep`: `[batch]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] when `keep` has not one entry per utterance or the width
    /// is not `dim`; [`CodecError::QuantizerLayers`] for a `keep` above `S`.
    pub fn keep_streams(
        &self,
        quantized: Tensor<3>,
        keep: &[usize],
    ) -> Result<Tensor<3>, CodecError> {
        let [batch, dim, frames] = quantized.dims();
        if keep.len() != batch || dim != self.dim() {
            return Err(CodecError::QuantizerShape {
                what: "nested dropout input [batch, dim, frames] and one kept count per utterance",
                expected: vec![keep.len(), self.dim(), frames],
                found: vec![batch, dim, frames],
            });
        }
        if let Some(&k) = keep.iter().find(|&&k| k > self.n_streams()) {
            return Err(CodecError::QuantizerLayers {
                start: 0,
                count: k,
                available: self.n_streams(),
            });
        }
        let per_stream = dim / self.n_streams().max(1);
        let mask: Vec<f32> = keep
            .iter()
            .flat_map(|&k| (0..dim).map(move |c| if c / per_stream < k { 1.0 } else { 0.0 }))
            .collect();
        let mask =
            Tensor::<3>::from_data(TensorData::new(mask, [batch, dim, 1]), &quantized.device());
        Ok(quantized * mask)
    }

    /// Stream tokens of `x` from the first `n_q` streams.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]` → `[n_q, batch, frames]`
    ///
    /// # Errors
    /// As [`Self::forward`].
    pub fn encode(&self, x: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError> {
        self.check_streams(n_q)?;
        Ok(self.pair(self.pq.encode(x, 2 * n_q)?))
    }

    /// Latents of the first `m` streams' tokens, the other streams zero (decoding from a
    /// prefix of the streams).
    ///
    /// # Shapes
    /// - `tokens`: `[m, batch, frames]`, `1 ≤ m ≤ S` → `[batch, dim, frames]`
    ///
    /// # Errors
    /// When `m` is 0 or exceeds the streams.
    pub fn decode(&self, tokens: Tensor<3, Int>) -> Result<Tensor<3>, CodecError> {
        let [m, _, _] = tokens.dims();
        self.check_streams(m)?;
        self.pq.decode(self.split(tokens))
    }

    /// EMA update of every sub-codebook on its channels of `x`.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]` (detached)
    ///
    /// # Errors
    /// As [`ProductQuantizer::ema_update`].
    pub fn ema_update(
        self,
        x: Tensor<3>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, Vec<CodebookUpdate>), CodecError> {
        let (pq, reports) = self.pq.ema_update(x, rng)?;
        Ok((Self { pq }, reports))
    }
}

impl Quantizer for OrderedProductQuantizer {
    fn num_streams(&self) -> usize {
        self.n_streams()
    }

    fn latent_dim(&self) -> usize {
        self.dim()
    }

    fn stream_codebook_size(&self) -> usize {
        self.stream_vocab()
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
