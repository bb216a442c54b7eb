//! Residual vector quantization (Zeghidour et al. 2021, "SoundStream", §3.3, algorithm 1):
//! layer `l` quantizes what layers `0..l` left over, so the first `m ≤ n_q` layers give a
//! coarser reconstruction and the number of layers used can be chosen at encode and decode
//! time ("quantizer dropout" bit rates).
//!
//! ```text
//! x [B, D, T] ─ rows [B·T, D] = r_0
//!   r_0 ─ VQ_0 ─ q_0, c_0        r_1 = r_0 − q_0
//!   r_1 ─ VQ_1 ─ q_1, c_1        r_2 = r_1 − q_1
//!   …                            quantized = q_0 + … + q_{m−1}     codes [m, B, T]
//! ```
//!
//! The layout of the parameters follows EnCodec's `ResidualVectorQuantization`
//! (`layers.{l}.codebook.{embed,embed_avg,cluster_size,inited}`), which is what
//! SpeechTokenizer's checkpoints hold under `quantizer.vq.layers.{l}._codebook.*`.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};

use super::codebook::{CodebookUpdate, SplitMix64};
use super::vq::{VectorQuantizer, VectorQuantizerConfig};
use super::{QuantizerMetrics, QuantizerOutput};
use crate::error::CodecError;

/// Configuration of a [`ResidualVectorQuantizer`]. Defaults: SpeechTokenizer's 8 × 1024 codes
/// of dimension 1024.
#[derive(Config, Debug)]
pub struct ResidualVectorQuantizerConfig {
    /// Number of layers `n_q`.
    #[config(default = 8)]
    pub n_q: usize,
    /// Each layer (all layers share this configuration).
    #[config(default = "VectorQuantizerConfig::new()")]
    pub layer: VectorQuantizerConfig,
}

impl ResidualVectorQuantizerConfig {
    /// Builds `n_q` fresh layers.
    pub fn init(&self, device: &Device) -> ResidualVectorQuantizer {
        ResidualVectorQuantizer {
            layers: (0..self.n_q).map(|_| self.layer.init(device)).collect(),
        }
    }
}

/// A residual vector quantizer (see the module documentation).
#[derive(Module, Debug)]
pub struct ResidualVectorQuantizer {
    /// The layers, coarse to fine.
    pub layers: Vec<VectorQuantizer>,
}

/// `[batch, dim, frames]` → rows `[batch·frames, dim]`.
fn to_rows(x: Tensor<3>) -> Tensor<2> {
    let [b, d, t] = x.dims();
    x.swap_dims(1, 2).reshape([b * t, d]) // [batch·frames, dim]
}

/// Rows `[batch·frames, dim]` → `[batch, dim, frames]`.
fn from_rows(rows: Tensor<2>, batch: usize, frames: usize) -> Tensor<3> {
    let [_, d] = rows.dims();
    rows.reshape([batch, frames, d]).swap_dims(1, 2) // [batch, dim, frames]
}

impl ResidualVectorQuantizer {
    /// Number of layers `n_q`.
    pub fn n_q(&self) -> usize {
        self.layers.len()
    }

    /// Input dimension.
    pub fn dim(&self) -> usize {
        self.layers.first().map_or(0, VectorQuantizer::dim)
    }

    /// Codebook size of layer 0 (every layer has the same).
    pub fn codebook_size(&self) -> usize {
        self.layers
            .first()
            .map_or(0, |l| l.codebook.codebook_size())
    }

    fn check_layers(&self, start: usize, count: usize) -> Result<(), CodecError> {
        super::check_streams(start, count, self.n_q())
    }

    fn check_input(&self, x: &Tensor<3>) -> Result<(), CodecError> {
        super::check_latents(x, self.dim())
    }

    /// Quantizes `x` with the first `n_q` layers (straight-through), collecting codes, the
    /// commitment loss (mean over the layers used) and usage metrics.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - returns: `quantized` `[batch, dim, frames]`, `codes` `[n_q, batch, frames]`,
    ///   `commitment_loss` `[1]`, one entry of `layer_quantized` (`[batch, dim, frames]`) and
    ///   `metrics` per layer
    ///
    /// # Errors
    /// When `n_q` is 0 or exceeds the layers, or `dim` is wrong.
    pub fn forward(&self, x: Tensor<3>, n_q: usize) -> Result<QuantizerOutput, CodecError> {
        self.check_layers(0, n_q)?;
        self.check_input(&x)?;
        let [b, _, t] = x.dims();
        let mut residual = to_rows(x);
        let mut quantized = residual.zeros_like();
        let mut codes = Vec::with_capacity(n_q);
        let mut losses = Vec::with_capacity(n_q);
        let mut layer_quantized = Vec::with_capacity(n_q);
        let mut metrics = Vec::with_capacity(n_q);
        for layer in &self.layers[..n_q] {
            let out = layer.forward(residual.clone());
            // `out.quantized` carries the identity gradient of `residual`, so the next residual
            // has none: the decoder's gradient reaches `x` once (through layer 0), not once per
            // layer, and only layer 0's commitment pulls the encoder (EnCodec's residual VQ).
            residual = residual - out.quantized.clone();
            quantized = quantized + out.quantized.clone();
            metrics.push(layer.metrics(out.codes.clone()));
            layer_quantized.push(from_rows(out.quantized, b, t));
            codes.push(out.codes.reshape([1, b, t]));
            losses.push(out.commitment_loss);
        }
        let commitment_loss = Tensor::cat(losses, 0).mean();
        Ok(QuantizerOutput {
            quantized: from_rows(quantized, b, t),
            codes: Tensor::cat(codes, 0),
            commitment_loss,
            layer_quantized,
            metrics,
        })
    }

    /// Codes of `x` from layers `start..start + n_q`.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - returns: `[n_q, batch, frames]`
    ///
    /// # Errors
    /// When the layer range is empty or exceeds the layers, or `dim` is wrong.
    pub fn encode_range(
        &self,
        x: Tensor<3>,
        start: usize,
        n_q: usize,
    ) -> Result<Tensor<3, Int>, CodecError> {
        self.check_layers(start, n_q)?;
        self.check_input(&x)?;
        let [b, _, t] = x.dims();
        let mut residual = to_rows(x);
        let mut codes = Vec::with_capacity(n_q);
        for layer in &self.layers[start..start + n_q] {
            let c = layer.encode(residual.clone());
            residual = residual - layer.decode(c.clone());
            codes.push(c.reshape([1, b, t]));
        }
        Ok(Tensor::cat(codes, 0))
    }

    /// Codes of `x` from the first `n_q` layers.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - returns: `[n_q, batch, frames]`
    ///
    /// # Errors
    /// As [`ResidualVectorQuantizer::encode_range`].
    pub fn encode(&self, x: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError> {
        self.encode_range(x, 0, n_q)
    }

    /// The sum of the code vectors of `codes`, whose first row belongs to layer `start`.
    ///
    /// # Shapes
    /// - `codes`: `[m, batch, frames]` with `start + m ≤ n_q`
    /// - returns: `[batch, dim, frames]`
    ///
    /// # Errors
    /// When the rows exceed the layers.
    pub fn decode_range(
        &self,
        codes: Tensor<3, Int>,
        start: usize,
    ) -> Result<Tensor<3>, CodecError> {
        let [m, b, t] = codes.dims();
        self.check_layers(start, m)?;
        let mut sum: Option<Tensor<2>> = None;
        for (i, layer) in self.layers[start..start + m].iter().enumerate() {
            let c = codes.clone().narrow(0, i, 1).reshape([b * t]); // [batch·frames]
            let q = layer.decode(c);
            sum = Some(match sum {
                Some(s) => s + q,
                None => q,
            });
        }
        match sum {
            Some(s) => Ok(from_rows(s, b, t)),
            None => Err(CodecError::QuantizerLayers {
                start,
                count: 0,
                available: self.n_q(),
            }),
        }
    }

    /// The sum of the code vectors of `codes` from layer 0 on (fewer rows than `n_q` decode a
    /// coarser approximation).
    ///
    /// # Shapes
    /// - `codes`: `[m, batch, frames]`, `1 ≤ m ≤ n_q`
    /// - returns: `[batch, dim, frames]`
    ///
    /// # Errors
    /// As [`ResidualVectorQuantizer::decode_range`].
    pub fn decode(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, CodecError> {
        self.decode_range(codes, 0)
    }

    /// EMA update of every layer on `x`: layer `l` is updated on the residual left by layers
    /// `0..l` after their own updates (so k-means of layer `l` sees residuals of initialised
    /// layers).
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]` (detached)
    ///
    /// # Errors
    /// As [`super::EuclideanCodebook::ema_update`], or a wrong `dim`.
    pub fn ema_update(
        self,
        x: Tensor<3>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, Vec<CodebookUpdate>), CodecError> {
        self.check_input(&x)?;
        let mut residual = to_rows(x.detach());
        let mut layers = Vec::with_capacity(self.layers.len());
        let mut reports = Vec::with_capacity(self.layers.len());
        for layer in self.layers {
            let (layer, report) = layer.ema_update(residual.clone(), rng)?;
            let codes = layer.encode(residual.clone());
            residual = residual - layer.decode(codes).detach();
            layers.push(layer);
            reports.push(report);
        }
        Ok((Self { layers }, reports))
    }

    /// Whether every codebook has been initialised.
    ///
    /// # Errors
    /// When a flag cannot be read back.
    pub fn is_initialized(&self) -> Result<bool, CodecError> {
        for layer in &self.layers {
            if !layer.codebook.is_initialized()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl QuantizerMetrics {
    /// Perplexity and usage of `codes` over a codebook of `codebook_size` entries.
    ///
    /// # Shapes
    /// - `codes`: `[n]`
    pub fn of_codes(codes: Tensor<1, Int>, codebook_size: usize) -> Self {
        let [n] = codes.dims();
        let counts = codes.one_hot::<2>(codebook_size).float().sum_dim(0); // [1, K]
        let p = counts.clone().div_scalar(n.max(1) as f64);
        let entropy = (p.clone() * p.clamp_min(1e-10).log()).sum().neg();
        let usage = counts
            .greater_elem(0.0)
            .float()
            .sum()
            .div_scalar(codebook_size.max(1) as f64);
        Self {
            perplexity: entropy.exp(),
            usage,
        }
    }
}
