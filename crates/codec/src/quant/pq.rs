//! Product quantization (Jégou et al. 2011; SoCodec's "PQ"): the latent vector is split into
//! `G` equal sub-vectors along the channels, each quantized by its own codebook, so `G` codes of
//! `K` entries describe `K^G` vectors at the cost of `G·K` code vectors.
//!
//! ```text
//! x [B, D, T] ─ channels [g·D/G, (g+1)·D/G) ─ VQ_g ─ q_g, c_g     g = 0..G
//! quantized = concat_g q_g  [B, D, T]                             codes [G, B, T]
//! ```
//!
//! Stream `g` is group `g`. Using the first `m < G` streams leaves the channels of the other
//! groups at zero (what decoding from a prefix of the streams means here). The codebooks are
//! [`super::EuclideanCodebook`]s: EMA updates, k-means initialisation and dead-code restart
//! as in the residual quantizer.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor};

use super::codebook::{CodebookUpdate, EuclideanCodebookConfig, SplitMix64};
use super::vq::{VectorQuantizer, VectorQuantizerConfig};
use super::{Quantizer, QuantizerOutput};
use crate::error::CodecError;

/// Configuration of a [`ProductQuantizer`].
#[derive(Config, Debug)]
pub struct ProductQuantizerConfig {
    /// Latent dimension `D` (a multiple of `groups`).
    pub dim: usize,
    /// Number of sub-vectors and codebooks `G`.
    pub groups: usize,
    /// Each group's codebook (its `dim` is set to `D / G`).
    #[config(default = "EuclideanCodebookConfig::new()")]
    pub codebook: EuclideanCodebookConfig,
    /// Weight of the commitment loss.
    #[config(default = 1.0)]
    pub commitment_weight: f64,
}

impl ProductQuantizerConfig {
    /// Builds `G` fresh group quantizers.
    ///
    /// # Errors
    /// [`CodecError::InvalidConfig`] when `groups` is 0 or does not divide `dim`.
    pub fn init(&self, device: &Device) -> Result<ProductQuantizer, CodecError> {
        if self.groups == 0 || self.dim == 0 || !self.dim.is_multiple_of(self.groups) {
            return Err(CodecError::InvalidConfig {
                field: "groups",
                reason: format!(
                    "{} product-quantizer groups must divide the dimension {}",
                    self.groups, self.dim
                ),
            });
        }
        let sub = self.dim / self.groups;
        let layer = VectorQuantizerConfig::new()
            .with_dim(sub)
            .with_codebook(self.codebook.clone().with_dim(sub))
            .with_commitment_weight(self.commitment_weight);
        Ok(ProductQuantizer {
            groups: (0..self.groups).map(|_| layer.init(device)).collect(),
        })
    }
}

/// A product quantizer (see the module documentation).
#[derive(Module, Debug)]
pub struct ProductQuantizer {
    /// One quantizer per group of channels, in channel order.
    pub groups: Vec<VectorQuantizer>,
}

/// The channels `[g·sub, (g+1)·sub)` of `x` as rows `[batch·frames, sub]`.
fn group_rows(x: &Tensor<3>, g: usize, sub: usize) -> Tensor<2> {
    let [b, _, t] = x.dims();
    x.clone()
        .narrow(1, g * sub, sub)
        .swap_dims(1, 2)
        .reshape([b * t, sub]) // [batch·frames, sub]
}

/// Rows `[batch·frames, sub]` → `[batch, sub, frames]`.
fn group_tensor(rows: Tensor<2>, batch: usize, frames: usize) -> Tensor<3> {
    let [_, sub] = rows.dims();
    rows.reshape([batch, frames, sub]).swap_dims(1, 2)
}

impl ProductQuantizer {
    /// Number of groups `G` (= streams).
    pub fn n_groups(&self) -> usize {
        self.groups.len()
    }

    /// Dimension of one sub-vector.
    pub fn sub_dim(&self) -> usize {
        self.groups.first().map_or(0, VectorQuantizer::dim)
    }

    /// Latent dimension `D`.
    pub fn dim(&self) -> usize {
        self.sub_dim() * self.n_groups()
    }

    /// Codebook size of each group.
    pub fn codebook_size(&self) -> usize {
        self.groups
            .first()
            .map_or(0, |g| g.codebook.codebook_size())
    }

    fn check_streams(&self, count: usize) -> Result<(), CodecError> {
        super::check_streams(0, count, self.n_groups())
    }

    fn check_input(&self, x: &Tensor<3>) -> Result<(), CodecError> {
        super::check_latents(x, self.dim())
    }

    /// Quantizes `x` with the first `n_q` groups (straight-through); the other groups'
    /// channels are zero.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - returns: `quantized` `[batch, dim, frames]`, `codes` `[n_q, batch, frames]`,
    ///   `commitment_loss` `[1]` (mean over the groups used), and per group used its
    ///   quantized output (`[batch, dim, frames]`, zero outside its channels) and metrics
    ///
    /// # Errors
    /// When `n_q` is 0 or exceeds the groups, or `dim` is wrong.
    pub fn forward(&self, x: Tensor<3>, n_q: usize) -> Result<QuantizerOutput, CodecError> {
        self.check_streams(n_q)?;
        self.check_input(&x)?;
        let [b, _, t] = x.dims();
        let sub = self.sub_dim();
        let device = x.device();
        let mut parts = Vec::with_capacity(self.n_groups());
        let mut codes = Vec::with_capacity(n_q);
        let mut losses = Vec::with_capacity(n_q);
        let mut layer_quantized = Vec::with_capacity(n_q);
        let mut metrics = Vec::with_capacity(n_q);
        for (g, group) in self.groups.iter().enumerate() {
            if g >= n_q {
                parts.push(Tensor::zeros([b, sub, t], &device));
                continue;
            }
            let out = group.forward(group_rows(&x, g, sub));
            let q = group_tensor(out.quantized, b, t); // [batch, sub, frames]
            metrics.push(group.metrics(out.codes.clone()));
            codes.push(out.codes.reshape([1, b, t]));
            losses.push(out.commitment_loss);
            layer_quantized.push(self.place(q.clone(), g));
            parts.push(q);
        }
        Ok(QuantizerOutput {
            quantized: Tensor::cat(parts, 1),
            codes: Tensor::cat(codes, 0),
            commitment_loss: Tensor::cat(losses, 0).mean(),
            layer_quantized,
            metrics,
        })
    }

    /// `q` (`[batch, sub, frames]`, group `g`) placed in a zero `[batch, dim, frames]`.
    fn place(&self, q: Tensor<3>, g: usize) -> Tensor<3> {
        let [b, sub, t] = q.dims();
        let device = q.device();
        let before = Tensor::zeros([b, g * sub, t], &device);
        let after = Tensor::zeros([b, (self.n_groups() - g - 1) * sub, t], &device);
        Tensor::cat(vec![before, q, after], 1)
    }

    /// Codes of `x` from the first `n_q` groups.
    ///
    /// # Shapes
    /// - `x`: `[batch, dim, frames]` → `[n_q, batch, frames]`
    ///
    /// # Errors
    /// When `n_q` is 0 or exceeds the groups, or `dim` is wrong.
    pub fn encode(&self, x: Tensor<3>, n_q: usize) -> Result<Tensor<3, Int>, CodecError> {
        self.check_streams(n_q)?;
        self.check_input(&x)?;
        let [b, _, t] = x.dims();
        let sub = self.sub_dim();
        let codes = self.groups[..n_q]
            .iter()
            .enumerate()
            .map(|(g, group)| group.encode(group_rows(&x, g, sub)).reshape([1, b, t]))
            .collect();
        Ok(Tensor::cat(codes, 0))
    }

    /// Latents of the first `m` groups' codes, the other groups' channels zero.
    ///
    /// # Shapes
    /// - `codes`: `[m, batch, frames]`, `1 ≤ m ≤ G` → `[batch, dim, frames]`
    ///
    /// # Errors
    /// When `m` is 0 or exceeds the groups.
    pub fn decode(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, CodecError> {
        let [m, b, t] = codes.dims();
        self.check_streams(m)?;
        let sub = self.sub_dim();
        let device = codes.device();
        let parts = (0..self.n_groups())
            .map(|g| {
                if g < m {
                    let c = codes.clone().narrow(0, g, 1).reshape([b * t]);
                    group_tensor(self.groups[g].decode(c), b, t)
                } else {
                    Tensor::zeros([b, sub, t], &device)
                }
            })
            .collect();
        Ok(Tensor::cat(parts, 1))
    }

    /// EMA update of every group's codebook on its own channels of `x`.
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
        let x = x.detach();
        let sub = self.sub_dim();
        let mut groups = Vec::with_capacity(self.groups.len());
        let mut reports = Vec::with_capacity(self.groups.len());
        for (g, group) in self.groups.into_iter().enumerate() {
            let (group, report) = group.ema_update(group_rows(&x, g, sub), rng)?;
            groups.push(group);
            reports.push(report);
        }
        Ok((Self { groups }, reports))
    }
}

impl Quantizer for ProductQuantizer {
    fn num_streams(&self) -> usize {
        self.n_groups()
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
