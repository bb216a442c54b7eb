//! SEANet encoder and decoder (Tagliasacchi et al. 2020; the EnCodec variant, Défossez et al.
//! 2022, §3.1), with SpeechTokenizer's change: the encoder's LSTM is bidirectional (Zhang et
//! al. 2024, "SpeechTokenizer", §3.1), so its last convolution reads `2·C` channels.
//!
//! ```text
//! encoder  wave [B, 1, S]
//!   SConv1d(1 → F, k7)
//!   for r in reversed(strides) (2, 4, 5, 8):  ResBlock(C) ×n_res, ELU, SConv1d(C → 2C, k 2r, s r)
//!   SLSTM(16F, bidirectional) → 32F channels, ELU, SConv1d(32F → D, k7)      latents [B, D, T]
//! decoder  latents [B, D, T]
//!   SConv1d(D → 16F, k7), SLSTM(16F, unidirectional)
//!   for r in strides (8, 5, 4, 2):  ELU, SConvTranspose1d(C → C/2, k 2r, s r), ResBlock(C/2) ×n_res
//!   ELU, SConv1d(F → 1, k7)                                                   wave [B, 1, T·hop]
//! ResBlock(C): x + [ELU, SConv1d(C → C/2, k3, dilation b^j), ELU, SConv1d(C/2 → C, k1)](x),
//!              the skip being a 1×1 SConv1d (EnCodec's `true_skip = false`)
//! ```
//!
//! `T = ceil(S / hop)` with `hop = Π strides` (320 at the defaults: 50 Hz at 16 kHz).

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Tensor};

use super::layers::{
    SConv1d, SConv1dConfig, SConvTranspose1d, SConvTranspose1dConfig, SLstm, SLstmConfig, elu,
};

/// Shape of a SEANet encoder/decoder pair. Defaults are SpeechTokenizer's
/// (`config/spt_base_cfg.json`).
#[derive(Config, Debug)]
pub struct SeanetConfig {
    /// Base width `F` (channels after the first convolution).
    #[config(default = 64)]
    pub n_filters: usize,
    /// Latent dimension `D`.
    #[config(default = 1024)]
    pub dimension: usize,
    /// Upsampling strides of the decoder (the encoder downsamples in reverse order).
    #[config(default = "vec![8, 5, 4, 2]")]
    pub strides: Vec<usize>,
    /// Residual blocks per resolution.
    #[config(default = 1)]
    pub n_residual_layers: usize,
    /// Kernel size of the first convolution of each residual block.
    #[config(default = 3)]
    pub residual_kernel_size: usize,
    /// Dilation of residual block `j` is `dilation_base^j`.
    #[config(default = 2)]
    pub dilation_base: usize,
    /// Kernel size of the first and last convolutions.
    #[config(default = 7)]
    pub kernel_size: usize,
    /// Channel reduction inside the residual blocks.
    #[config(default = 2)]
    pub compress: usize,
    /// LSTM layers after the encoder's convolutions and before the decoder's (0: none).
    #[config(default = 2)]
    pub lstm_layers: usize,
    /// Whether the encoder's LSTM is bidirectional (the decoder's never is).
    #[config(default = true)]
    pub bidirectional: bool,
}

impl SeanetConfig {
    /// Samples per latent frame: the product of the strides.
    pub fn hop_length(&self) -> usize {
        self.strides.iter().product()
    }

    fn conv(&self, c_in: usize, c_out: usize, k: usize, device: &Device) -> SConv1d {
        SConv1dConfig::new()
            .with_channels_in(c_in)
            .with_channels_out(c_out)
            .with_kernel_size(k)
            .init(device)
    }

    fn res_blocks(&self, channels: usize, device: &Device) -> Vec<ResnetBlock> {
        (0..self.n_residual_layers)
            .map(|j| {
                let hidden = channels / self.compress.max(1);
                ResnetBlock {
                    conv1: SConv1dConfig::new()
                        .with_channels_in(channels)
                        .with_channels_out(hidden)
                        .with_kernel_size(self.residual_kernel_size)
                        .with_dilation(self.dilation_base.pow(j as u32))
                        .init(device),
                    conv2: self.conv(hidden, channels, 1, device),
                    shortcut: self.conv(channels, channels, 1, device),
                }
            })
            .collect()
    }

    /// Builds the encoder.
    pub fn init_encoder(&self, device: &Device) -> SeanetEncoder {
        let f = self.n_filters;
        let mut mult = 1;
        let mut stages = Vec::with_capacity(self.strides.len());
        for &ratio in self.strides.iter().rev() {
            let c = mult * f;
            stages.push(EncoderStage {
                res: self.res_blocks(c, device),
                down: SConv1dConfig::new()
                    .with_channels_in(c)
                    .with_channels_out(2 * c)
                    .with_kernel_size(2 * ratio)
                    .with_stride(ratio)
                    .init(device),
            });
            mult *= 2;
        }
        let lstm = (self.lstm_layers > 0).then(|| {
            SLstmConfig::new()
                .with_dim(mult * f)
                .with_num_layers(self.lstm_layers)
                .with_bidirectional(self.bidirectional)
                .init(device)
        });
        let last_in = if self.lstm_layers > 0 && self.bidirectional {
            2 * mult * f
        } else {
            mult * f
        };
        SeanetEncoder {
            first: self.conv(1, f, self.kernel_size, device),
            stages,
            lstm,
            last: self.conv(last_in, self.dimension, self.kernel_size, device),
        }
    }

    /// Builds the decoder.
    pub fn init_decoder(&self, device: &Device) -> SeanetDecoder {
        let f = self.n_filters;
        let mut mult = 1usize << self.strides.len();
        let first = self.conv(self.dimension, mult * f, self.kernel_size, device);
        let lstm = (self.lstm_layers > 0).then(|| {
            SLstmConfig::new()
                .with_dim(mult * f)
                .with_num_layers(self.lstm_layers)
                .with_bidirectional(false)
                .init(device)
        });
        let mut stages = Vec::with_capacity(self.strides.len());
        for &ratio in &self.strides {
            let c = mult * f;
            stages.push(DecoderStage {
                up: SConvTranspose1dConfig::new()
                    .with_channels_in(c)
                    .with_channels_out(c / 2)
                    .with_kernel_size(2 * ratio)
                    .with_stride(ratio)
                    .init(device),
                res: self.res_blocks(c / 2, device),
            });
            mult /= 2;
        }
        SeanetDecoder {
            first,
            lstm,
            stages,
            last: self.conv(f, 1, self.kernel_size, device),
        }
    }
}

/// A SEANet residual block (see the module documentation).
#[derive(Module, Debug)]
pub struct ResnetBlock {
    /// `C → C/compress`, kernel `residual_kernel_size`, dilated.
    pub conv1: SConv1d,
    /// `C/compress → C`, kernel 1.
    pub conv2: SConv1d,
    /// The 1×1 skip convolution.
    pub shortcut: SConv1d,
}

impl ResnetBlock {
    /// # Shapes
    /// - `x`: `[batch, channels, time]` → `[batch, channels, time]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let y = self.conv2.forward(elu(self.conv1.forward(elu(x.clone()))));
        self.shortcut.forward(x) + y
    }
}

/// Residual blocks then a strided convolution.
#[derive(Module, Debug)]
pub struct EncoderStage {
    /// Residual blocks at this resolution.
    pub res: Vec<ResnetBlock>,
    /// Downsampling convolution (`C → 2C`).
    pub down: SConv1d,
}

/// The SEANet encoder (see the module documentation).
#[derive(Module, Debug)]
pub struct SeanetEncoder {
    /// `1 → F`.
    pub first: SConv1d,
    /// One stage per stride, finest first.
    pub stages: Vec<EncoderStage>,
    /// The (bidirectional) LSTM.
    pub lstm: Option<SLstm>,
    /// `→ D`.
    pub last: SConv1d,
}

impl SeanetEncoder {
    /// # Shapes
    /// - `wave`: `[batch, 1, samples]`
    /// - returns: `[batch, dimension, ceil(samples / hop)]`
    pub fn forward(&self, wave: Tensor<3>) -> Tensor<3> {
        let mut x = self.first.forward(wave);
        for stage in &self.stages {
            for block in &stage.res {
                x = block.forward(x);
            }
            x = stage.down.forward(elu(x));
        }
        if let Some(lstm) = &self.lstm {
            x = lstm.forward(x);
        }
        self.last.forward(elu(x))
    }
}

/// A transposed convolution then residual blocks.
#[derive(Module, Debug)]
pub struct DecoderStage {
    /// Upsampling transposed convolution (`C → C/2`).
    pub up: SConvTranspose1d,
    /// Residual blocks at the new resolution.
    pub res: Vec<ResnetBlock>,
}

/// The SEANet decoder (see the module documentation).
#[derive(Module, Debug)]
pub struct SeanetDecoder {
    /// `D → 2^len(strides) · F`.
    pub first: SConv1d,
    /// The unidirectional LSTM.
    pub lstm: Option<SLstm>,
    /// One stage per stride, coarsest first.
    pub stages: Vec<DecoderStage>,
    /// `F → 1`.
    pub last: SConv1d,
}

impl SeanetDecoder {
    /// # Shapes
    /// - `latents`: `[batch, dimension, frames]`
    /// - returns: `[batch, 1, frames · hop]`
    pub fn forward(&self, latents: Tensor<3>) -> Tensor<3> {
        let mut x = self.first.forward(latents);
        if let Some(lstm) = &self.lstm {
            x = lstm.forward(x);
        }
        for stage in &self.stages {
            x = stage.up.forward(elu(x));
            for block in &stage.res {
                x = block.forward(x);
            }
        }
        self.last.forward(elu(x))
    }
}
