//! One vector quantizer: an optional projection into the codebook space, a
//! [`EuclideanCodebook`], the straight-through estimator and the commitment loss (van den Oord
//! et al. 2017, §3.2: `sg[z_q] − z` passes the decoder's gradient to the encoder unchanged;
//! the commitment term `‖z − sg[z_q]‖²` keeps the encoder close to its codes; the codebook
//! itself learns by EMA, so the codebook loss term is absent).
//!
//! ```text
//! x [n, dim] ─ project_in? ─ z [n, codebook_dim] ─ nearest code ─ codes [n]
//!                                                      │
//!     quantized = x + sg[project_out(e_codes) − x]  ◄──┘   commitment = mean((z − sg[e_codes])²)
//! ```

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};

use super::QuantizerMetrics;
use super::codebook::{CodebookUpdate, EuclideanCodebook, EuclideanCodebookConfig, SplitMix64};
use crate::error::CodecError;

/// Configuration of a [`VectorQuantizer`].
#[derive(Config, Debug)]
pub struct VectorQuantizerConfig {
    /// Input dimension.
    #[config(default = 1024)]
    pub dim: usize,
    /// Codebook dimension; `None` (or equal to `dim`) means no projections.
    #[config(default = "None")]
    pub codebook_dim: Option<usize>,
    /// The codebook (its `dim` is overridden by the codebook dimension).
    #[config(default = "EuclideanCodebookConfig::new()")]
    pub codebook: EuclideanCodebookConfig,
    /// Weight of the commitment loss.
    #[config(default = 1.0)]
    pub commitment_weight: f64,
}

impl VectorQuantizerConfig {
    /// Builds the quantizer with a fresh codebook.
    pub fn init(&self, device: &Device) -> VectorQuantizer {
        let cb_dim = self.codebook_dim.unwrap_or(self.dim);
        let projected = cb_dim != self.dim;
        VectorQuantizer {
            project_in: projected.then(|| LinearConfig::new(self.dim, cb_dim).init(device)),
            project_out: projected.then(|| LinearConfig::new(cb_dim, self.dim).init(device)),
            codebook: self.codebook.clone().with_dim(cb_dim).init(device),
            commitment_weight: self.commitment_weight,
        }
    }
}

/// The output of one quantizer layer on a batch of vectors.
#[derive(Debug, Clone)]
pub struct VqOutput {
    /// Straight-through quantized vectors `[n, dim]`: equal to the code vectors in value, with
    /// the gradient of the input.
    pub quantized: Tensor<2>,
    /// Code indices `[n]`.
    pub codes: Tensor<1, Int>,
    /// Weighted commitment loss `[1]`.
    pub commitment_loss: Tensor<1>,
}

/// A vector quantizer (see the module documentation).
#[derive(Module, Debug)]
pub struct VectorQuantizer {
    /// Projection into the codebook space (absent when the dimensions agree).
    pub project_in: Option<Linear>,
    /// Projection out of the codebook space.
    pub project_out: Option<Linear>,
    /// The codebook.
    pub codebook: EuclideanCodebook,
    #[module(skip)]
    commitment_weight: f64,
}

impl VectorQuantizer {
    fn project_in(&self, x: Tensor<2>) -> Tensor<2> {
        match &self.project_in {
            Some(p) => p.forward(x),
            None => x,
        }
    }

    fn project_out(&self, x: Tensor<2>) -> Tensor<2> {
        match &self.project_out {
            Some(p) => p.forward(x),
            None => x,
        }
    }

    /// Input dimension.
    pub fn dim(&self) -> usize {
        match &self.project_in {
            Some(p) => p.weight.shape().dims::<2>()[0],
            None => self.codebook.dim(),
        }
    }

    /// Codes of `x`.
    ///
    /// # Shapes
    /// - `x`: `[n, dim]`
    /// - returns: `[n]`
    pub fn encode(&self, x: Tensor<2>) -> Tensor<1, Int> {
        self.codebook.encode(self.project_in(x))
    }

    /// Vectors of `codes`.
    ///
    /// # Shapes
    /// - `codes`: `[n]`
    /// - returns: `[n, dim]`
    pub fn decode(&self, codes: Tensor<1, Int>) -> Tensor<2> {
        self.project_out(self.codebook.decode(codes))
    }

    /// Quantizes `x` with the straight-through estimator and the commitment loss.
    ///
    /// # Shapes
    /// - `x`: `[n, dim]`
    /// - returns: [`VqOutput`] with `quantized` `[n, dim]`, `codes` `[n]`, loss `[1]`
    pub fn forward(&self, x: Tensor<2>) -> VqOutput {
        let z = self.project_in(x.clone());
        let codes = self.codebook.encode(z.clone());
        let e = self.codebook.decode(codes.clone()); // [n, codebook_dim]
        let commitment_loss = (z - e.clone().detach())
            .square()
            .mean()
            .mul_scalar(self.commitment_weight);
        let q = self.project_out(e);
        let quantized = x.clone() + (q - x).detach();
        VqOutput {
            quantized,
            codes,
            commitment_loss,
        }
    }

    /// Usage metrics of `codes` from this layer.
    ///
    /// # Shapes
    /// - `codes`: `[n]`
    pub fn metrics(&self, codes: Tensor<1, Int>) -> QuantizerMetrics {
        QuantizerMetrics::of_codes(codes, self.codebook.codebook_size())
    }

    /// EMA update of the codebook on `x` (projected first; see
    /// [`EuclideanCodebook::ema_update`]).
    ///
    /// # Shapes
    /// - `x`: `[n, dim]`
    ///
    /// # Errors
    /// As [`EuclideanCodebook::ema_update`].
    pub fn ema_update(
        mut self,
        x: Tensor<2>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, CodebookUpdate), CodecError> {
        let z = self.project_in(x).detach();
        let (codebook, report) = self.codebook.ema_update(z, rng)?;
        self.codebook = codebook;
        Ok((self, report))
    }
}
