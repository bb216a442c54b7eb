//! Waveform discriminators for adversarial codec training (HiFi-GAN, Kong et al. 2020, §2.2):
//!
//! - the multi-period discriminator (MPD): for each period `p`, the waveform is folded into
//!   `[batch, 1, samples / p, p]` (right-padded by reflection to a multiple of `p`) and a stack
//!   of `(5, 1)` 2-D convolutions with stride `(3, 1)` looks at every `p`-th sample;
//! - the multi-scale discriminator (MSD): the same grouped 1-D convolution stack on the
//!   waveform average-pooled by 1, 2 and 4.
//!
//! Each sub-discriminator returns its logits and the feature map after every convolution,
//! flattened to `[batch, n]`, which is the form the LSGAN and feature-matching losses in
//! [`crate::losses`] take. Widths are `base_channels` multiples (HiFi-GAN: 32 for the MPD,
//! 128 for the MSD) so tests can build tiny ones.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig, Conv2d, Conv2dConfig};
use burn::nn::pool::{AvgPool1d, AvgPool1dConfig};
use burn::nn::{PaddingConfig1d, PaddingConfig2d};
use burn::tensor::activation::leaky_relu;
use burn::tensor::ops::PadMode;
use burn::tensor::{Device, Tensor};

/// Slope of the leaky ReLUs.
const LRELU: f64 = 0.1;

/// Configuration of the discriminator ensemble.
#[derive(Config, Debug, PartialEq)]
pub struct DiscriminatorsConfig {
    /// Periods of the multi-period discriminator (empty: no MPD).
    #[config(default = "vec![2, 3, 5, 7, 11]")]
    pub periods: Vec<usize>,
    /// Base width of each period discriminator (channels 1 → c → 4c → 16c → 32c → 32c).
    #[config(default = 32)]
    pub period_channels: usize,
    /// Number of scales of the multi-scale discriminator (0: no MSD).
    #[config(default = 3)]
    pub scales: usize,
    /// Base width of each scale discriminator (channels c → c → 2c → 4c → 8c → 8c → 8c).
    #[config(default = 128)]
    pub scale_channels: usize,
}

impl DiscriminatorsConfig {
    /// Builds the ensemble.
    pub fn init(&self, device: &Device) -> Discriminators {
        let c = self.period_channels.max(1);
        let widths = [1, c, 4 * c, 16 * c, 32 * c];
        let periods = self
            .periods
            .iter()
            .map(|&period| {
                let mut convs = Vec::new();
                for w in widths.windows(2) {
                    convs.push(
                        Conv2dConfig::new([w[0], w[1]], [5, 1])
                            .with_stride([3, 1])
                            .with_padding(PaddingConfig2d::Explicit(2, 0, 2, 0))
                            .init(device),
                    );
                }
                convs.push(
                    Conv2dConfig::new([32 * c, 32 * c], [5, 1])
                        .with_padding(PaddingConfig2d::Explicit(2, 0, 2, 0))
                        .init(device),
                );
                PeriodDiscriminator {
                    convs,
                    post: Conv2dConfig::new([32 * c, 1], [3, 1])
                        .with_padding(PaddingConfig2d::Explicit(1, 0, 1, 0))
                        .init(device),
                    period,
                }
            })
            .collect();
        let s = self.scale_channels.max(16);
        // (in, out, kernel, stride, groups) of HiFi-GAN's scale discriminator, widths scaled.
        let layers = [
            (1, s, 15, 1, 1),
            (s, s, 41, 2, 4),
            (s, 2 * s, 41, 2, 16),
            (2 * s, 4 * s, 41, 4, 16),
            (4 * s, 8 * s, 41, 4, 16),
            (8 * s, 8 * s, 41, 1, 16),
            (8 * s, 8 * s, 5, 1, 1),
        ];
        let scales = (0..self.scales)
            .map(|i| ScaleDiscriminator {
                pool: (i > 0).then(|| {
                    AvgPool1dConfig::new(4)
                        .with_stride(2)
                        .with_padding(PaddingConfig1d::Explicit(2, 2))
                        .init()
                }),
                pools: i,
                convs: layers
                    .iter()
                    .map(|&(c_in, c_out, k, stride, groups)| {
                        Conv1dConfig::new(c_in, c_out, k)
                            .with_stride(stride)
                            .with_groups(groups)
                            .with_padding(PaddingConfig1d::Explicit(k / 2, k / 2))
                            .init(device)
                    })
                    .collect(),
                post: Conv1dConfig::new(8 * s, 1, 3)
                    .with_padding(PaddingConfig1d::Explicit(1, 1))
                    .init(device),
            })
            .collect();
        Discriminators { periods, scales }
    }
}

/// The logits and feature maps of one sub-discriminator, each `[batch, n]`.
#[derive(Debug, Clone)]
pub struct DiscriminatorOutput {
    /// Logits `[batch, n]`.
    pub logits: Tensor<2>,
    /// Feature map after every convolution `[batch, n_l]`.
    pub features: Vec<Tensor<2>>,
}

fn flatten<const D: usize>(x: Tensor<D>) -> Tensor<2> {
    let dims = x.dims();
    let batch = dims[0];
    let rest: usize = dims[1..].iter().product();
    x.reshape([batch, rest]) // [batch, channels · time (· period)]
}

/// One period discriminator of the MPD.
#[derive(Module, Debug)]
pub struct PeriodDiscriminator {
    /// `(5, 1)` convolutions.
    pub convs: Vec<Conv2d>,
    /// Output convolution.
    pub post: Conv2d,
    #[module(skip)]
    period: usize,
}

impl PeriodDiscriminator {
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`; see [`DiscriminatorOutput`]
    pub fn forward(&self, wave: Tensor<3>) -> DiscriminatorOutput {
        let [b, c, t] = wave.dims();
        let p = self.period.max(1);
        let rem = t % p;
        let x = if rem != 0 {
            let pad = p - rem;
            if pad < t {
                wave.pad([(0, pad)], PadMode::Reflect)
            } else {
                wave.pad([(0, pad)], PadMode::Constant(0.0))
            }
        } else {
            wave
        };
        let t = x.dims()[2];
        let mut x = x.reshape([b, c, t / p, p]); // [batch, 1, samples / p, p]
        let mut features = Vec::with_capacity(self.convs.len() + 1);
        for conv in &self.convs {
            x = leaky_relu(conv.forward(x), LRELU);
            features.push(flatten(x.clone()));
        }
        let x = self.post.forward(x);
        features.push(flatten(x.clone()));
        DiscriminatorOutput {
            logits: flatten(x),
            features,
        }
    }
}

/// One scale discriminator of the MSD.
#[derive(Module, Debug)]
pub struct ScaleDiscriminator {
    /// Average pooling before this scale (absent at full resolution).
    pub pool: Option<AvgPool1d>,
    /// Grouped convolutions.
    pub convs: Vec<Conv1d>,
    /// Output convolution.
    pub post: Conv1d,
    #[module(skip)]
    pools: usize,
}

impl ScaleDiscriminator {
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`; see [`DiscriminatorOutput`]
    pub fn forward(&self, wave: Tensor<3>) -> DiscriminatorOutput {
        let mut x = wave;
        if let Some(pool) = &self.pool {
            for _ in 0..self.pools {
                x = pool.forward(x);
            }
        }
        let mut features = Vec::with_capacity(self.convs.len() + 1);
        for conv in &self.convs {
            x = leaky_relu(conv.forward(x), LRELU);
            features.push(flatten(x.clone()));
        }
        let x = self.post.forward(x);
        features.push(flatten(x.clone()));
        DiscriminatorOutput {
            logits: flatten(x),
            features,
        }
    }
}

/// The MPD and MSD together.
#[derive(Module, Debug)]
pub struct Discriminators {
    /// Period discriminators.
    pub periods: Vec<PeriodDiscriminator>,
    /// Scale discriminators (scale `i` pools `i` times).
    pub scales: Vec<ScaleDiscriminator>,
}

impl Discriminators {
    /// Every sub-discriminator on `wave`.
    ///
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`; one [`DiscriminatorOutput`] per sub-discriminator
    pub fn forward(&self, wave: Tensor<3>) -> Vec<DiscriminatorOutput> {
        self.periods
            .iter()
            .map(|d| d.forward(wave.clone()))
            .chain(self.scales.iter().map(|d| d.forward(wave.clone())))
            .collect()
    }

    /// The discriminators' objective: LSGAN on `real` against `fake`, which is detached here
    /// so that no gradient reaches the generator.
    ///
    /// # Shapes
    /// - `real`, `fake`: `[batch, 1, samples]`; returns `[1]`
    pub fn discriminator_loss(&self, real: Tensor<3>, fake: Tensor<3>) -> Tensor<1> {
        let logits = |wave: Tensor<3>| -> Vec<Tensor<2>> {
            self.forward(wave).into_iter().map(|o| o.logits).collect()
        };
        crate::losses::discriminator_loss(&logits(real), &logits(fake.detach()))
    }

    /// The generator's adversarial terms: `(LSGAN generator loss, feature matching)` of `fake`
    /// against `real`.
    ///
    /// # Shapes
    /// - `real`, `fake`: `[batch, 1, samples]`; returns two `[1]`
    pub fn generator_losses(&self, real: Tensor<3>, fake: Tensor<3>) -> (Tensor<1>, Tensor<1>) {
        let outs_real = self.forward(real);
        let outs_fake = self.forward(fake);
        let fake_logits: Vec<Tensor<2>> = outs_fake.iter().map(|o| o.logits.clone()).collect();
        let (fm_real, fm_fake): (Vec<Tensor<2>>, Vec<Tensor<2>>) = outs_real
            .into_iter()
            .zip(outs_fake)
            .flat_map(|(r, f)| r.features.into_iter().zip(f.features))
            .unzip();
        (
            crate::losses::generator_adversarial_loss(&fake_logits),
            crate::losses::feature_matching_loss(&fm_real, &fm_fake),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_ensemble_shapes() {
        let device = Device::flex();
        let d = DiscriminatorsConfig::new()
            .with_periods(vec![2, 3])
            .with_period_channels(2)
            .with_scales(2)
            .with_scale_channels(16)
            .init(&device);
        let wave: Tensor<3> = Tensor::zeros([2, 1, 301], &device);
        let outs = d.forward(wave);
        assert_eq!(outs.len(), 4);
        for (i, o) in outs.iter().enumerate() {
            assert_eq!(o.logits.dims()[0], 2);
            assert!(o.logits.dims()[1] > 0);
            // Period: 5 convolutions + post; scale: 7 convolutions + post.
            assert_eq!(o.features.len(), if i < 2 { 6 } else { 8 });
        }
    }
}
