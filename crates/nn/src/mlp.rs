//! Position-wise feed-forward block: GELU (Hendrycks & Gimpel 2016; GPT-2) or SwiGLU
//! (Shazeer 2020, "GLU Variants Improve Transformer", §2, eq. 6), chosen by [`MlpKind`].

use crate::activation::{gelu, silu};
use crate::linear::linear;
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

/// Which feed-forward block a transformer layer uses.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum MlpKind {
    /// `down(gelu(up(x)))`.
    Gelu,
    /// `down(silu(gate(x)) * up(x))`.
    SwiGlu,
}

impl MlpKind {
    /// Builds a block `d_model → d_ff → d_model`.
    pub(crate) fn init(self, d_model: usize, d_ff: usize, bias: bool, device: &Device) -> Mlp {
        let linear = |d_in, d_out| LinearConfig::new(d_in, d_out).with_bias(bias).init(device);
        Mlp {
            up: linear(d_model, d_ff),
            gate: match self {
                MlpKind::Gelu => None,
                MlpKind::SwiGlu => Some(linear(d_model, d_ff)),
            },
            down: linear(d_ff, d_model),
        }
    }
}

/// Feed-forward block; SwiGLU when `gate` is present, GELU otherwise.
#[derive(Module, Debug)]
pub struct Mlp {
    /// `d_model → d_ff`.
    pub up: Linear,
    /// `d_model → d_ff`, the SiLU-activated gate of SwiGLU.
    pub gate: Option<Linear>,
    /// `d_ff → d_model`.
    pub down: Linear,
}

impl Mlp {
    /// Applies the block at every position.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`
    /// - output: `[batch, time, d_model]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let hidden = match &self.gate {
            Some(gate) => silu(linear(gate, x.clone())) * linear(&self.up, x),
            None => gelu(linear(&self.up, x)),
        };
        // [batch, time, d_ff] -> [batch, time, d_model]
        linear(&self.down, hidden)
    }
}
