//! Pre-norm layers: RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization", §3)
//! or LayerNorm (Ba et al. 2016, "Layer Normalization", §3), chosen by [`NormKind`].

use burn::config::Config;
use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig, RmsNorm, RmsNormConfig};
use burn::tensor::{Device, Tensor};

use crate::fused_norm;

/// Which normalisation a transformer stack uses before each sub-layer and at its end.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum NormKind {
    /// RMSNorm: scale only, no centring (LLaMA, moshi).
    Rms,
    /// LayerNorm with a bias (GPT-2).
    Layer,
}

impl NormKind {
    /// Builds a norm of width `d_model`.
    pub(crate) fn init(self, d_model: usize, eps: f64, device: &Device) -> Norm {
        match self {
            NormKind::Rms => Norm::Rms(RmsNormConfig::new(d_model).with_epsilon(eps).init(device)),
            NormKind::Layer => {
                Norm::Layer(LayerNormConfig::new(d_model).with_epsilon(eps).init(device))
            }
        }
    }
}

/// A normalisation over the last axis; the variant is fixed by [`NormKind`].
#[derive(Module, Debug)]
pub enum Norm {
    /// RMSNorm.
    Rms(RmsNorm),
    /// LayerNorm.
    Layer(LayerNorm),
}

impl Norm {
    /// Normalises over the last axis.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`
    /// - output: `[batch, time, d_model]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward_with(x, None)
    }

    /// [`Norm::forward`], with LayerNorm's ε given (Burn's LayerNorm keeps its own private), so
    /// that the fused kernels ([`crate::fused_norm`]) serve LayerNorm too; RMSNorm is fused
    /// either way. Off the CPU backend, Burn's modules.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`
    /// - output: `[batch, time, d_model]`
    pub fn forward_with(&self, x: Tensor<3>, layer_eps: Option<f64>) -> Tensor<3> {
        match self {
            Norm::Rms(norm) => {
                fused_norm::norm(x.clone(), norm.gamma.val(), None, norm.epsilon, false)
                    .unwrap_or_else(|| norm.forward(x))
            }
            Norm::Layer(norm) => layer_eps
                .and_then(|eps| {
                    let beta = norm.beta.as_ref().map(|b| b.val());
                    fused_norm::norm(x.clone(), norm.gamma.val(), beta, eps, true)
                })
                .unwrap_or_else(|| norm.forward(x)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_output_has_unit_rms_and_layer_output_zero_mean() {
        let device = Device::flex();
        let x = Tensor::<3>::from_floats([[[1.0, 2.0, 3.0, 6.0], [-1.0, 0.5, 0.0, 4.0]]], &device);

        let rms = NormKind::Rms.init(4, 1e-6, &device).forward(x.clone());
        let ms: Vec<f32> = rms
            .square()
            .mean_dim(2)
            .to_data()
            .try_to_vec()
            .expect("f32 data");
        for v in ms {
            assert!((v - 1.0).abs() < 1e-4, "mean square {v}");
        }

        let ln = NormKind::Layer.init(4, 1e-6, &device).forward(x);
        let mean: Vec<f32> = ln.mean_dim(2).to_data().try_to_vec().expect("f32 data");
        for v in mean {
            assert!(v.abs() < 1e-5, "mean {v}");
        }
    }
}
