//! Convolution blocks of the SoCodec-style codec: residual 1-D conv blocks and the stages that
//! change the frame rate by whole factors (strided convolution down, transposed convolution up).
//!
//! Every convolution keeps the time axis exact: `k = 3` with one frame of zero padding each
//! side, downsampling by `f` is a kernel-`f` stride-`f` convolution (the input length is a
//! multiple of `f`), upsampling by `f` a kernel-`f` stride-`f` transposed convolution.

use burn::module::Module;
use burn::nn::PaddingConfig1d;
use burn::nn::conv::{Conv1d, Conv1dConfig, ConvTranspose1d, ConvTranspose1dConfig};
use burn::tensor::activation::gelu;
use burn::tensor::{Device, Tensor};

/// A same-length convolution of odd `kernel` (zero padding).
pub(crate) fn conv(
    channels_in: usize,
    channels_out: usize,
    kernel: usize,
    device: &Device,
) -> Conv1d {
    Conv1dConfig::new(channels_in, channels_out, kernel)
        .with_padding(PaddingConfig1d::Explicit(kernel / 2, kernel / 2))
        .init(device)
}

/// `x + conv(gelu(conv(gelu(x))))`.
#[derive(Module, Debug)]
pub struct ResBlock {
    /// First convolution (kernel 3).
    pub conv1: Conv1d,
    /// Second convolution (kernel 3).
    pub conv2: Conv1d,
}

impl ResBlock {
    /// A block of `channels` channels.
    pub fn new(channels: usize, device: &Device) -> Self {
        Self {
            conv1: conv(channels, channels, 3, device),
            conv2: conv(channels, channels, 3, device),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, channels, time]` → `[batch, channels, time]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = self.conv1.forward(gelu(x.clone()));
        x + self.conv2.forward(gelu(h))
    }
}

/// One rate-changing stage: `blocks` residual blocks, then a resampling convolution.
#[derive(Module, Debug)]
pub struct DownStage {
    /// Residual blocks at the input rate.
    pub blocks: Vec<ResBlock>,
    /// Kernel-`f`, stride-`f` convolution.
    pub down: Conv1d,
}

impl DownStage {
    /// A stage dividing the frame rate by `factor`.
    pub fn new(channels: usize, blocks: usize, factor: usize, device: &Device) -> Self {
        Self {
            blocks: (0..blocks)
                .map(|_| ResBlock::new(channels, device))
                .collect(),
            down: Conv1dConfig::new(channels, channels, factor)
                .with_stride(factor)
                .init(device),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, channels, time]` (`time` a multiple of the factor) →
    ///   `[batch, channels, time / factor]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let x = self.blocks.iter().fold(x, |x, b| b.forward(x));
        self.down.forward(gelu(x))
    }
}

/// One upsampling stage: a transposed convolution, then `blocks` residual blocks.
#[derive(Module, Debug)]
pub struct UpStage {
    /// Kernel-`f`, stride-`f` transposed convolution.
    pub up: ConvTranspose1d,
    /// Residual blocks at the output rate.
    pub blocks: Vec<ResBlock>,
}

impl UpStage {
    /// A stage multiplying the frame rate by `factor`.
    pub fn new(channels: usize, blocks: usize, factor: usize, device: &Device) -> Self {
        Self {
            up: ConvTranspose1dConfig::new([channels, channels], factor)
                .with_stride(factor)
                .init(device),
            blocks: (0..blocks)
                .map(|_| ResBlock::new(channels, device))
                .collect(),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, channels, time]` → `[batch, channels, time · factor]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let x = self.up.forward(gelu(x));
        self.blocks.iter().fold(x, |x, b| b.forward(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_change_the_rate_by_their_factor() {
        let device = Device::flex();
        let x = Tensor::<3>::random(
            [2, 8, 12],
            burn::tensor::Distribution::Normal(0.0, 1.0),
            &device,
        );
        assert_eq!(
            ResBlock::new(8, &device).forward(x.clone()).dims(),
            [2, 8, 12]
        );
        let down = DownStage::new(8, 1, 3, &device).forward(x.clone());
        assert_eq!(down.dims(), [2, 8, 4]);
        assert_eq!(
            UpStage::new(8, 1, 3, &device).forward(down).dims(),
            [2, 8, 12]
        );
    }
}
