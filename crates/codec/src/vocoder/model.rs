//! Vocos-style vocoder (Siuzdenko 2023, "Vocos: Closing the gap between time-domain and
//! Fourier-based neural vocoders for high-quality audio synthesis", §3): a ConvNeXt backbone at
//! the frame rate predicts a complex STFT, and an inverse STFT turns it into samples, so no
//! layer runs at the sample rate.
//!
//! ```text
//! log-mel [B, n_mels, F]
//!   └ Conv1d(n_mels → dim, k 7) ─ LayerNorm
//!   └ N × ConvNeXt block:  x + γ · W_down GELU(W_up LN(dwconv_k7(x)))
//!   └ LayerNorm ─ Linear(dim → 2 · n_bins) ─ split (log|X|, φ)
//!   └ X = min(e^{log|X|}, 100) · (cos φ + i sin φ)        (no atan2 anywhere)
//!   └ iSTFT (hop = mel hop, centred) ─▶ waveform [B, F · hop]
//! ```
//!
//! The mel front end (`voxspec_audio::LogMel`) and the iSTFT share `n_fft`, `hop_length` and
//! `win_length`, all stored in [`VocosConfig`].

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::activation::gelu;
use burn::tensor::{Device, Tensor};
use voxspec_audio::{MelConfig, StftConfig};

use crate::error::VocoderError;
use crate::vocoder::griffin_lim::PhaseRefinement;
use crate::vocoder::stft::TensorStft;

/// ε of every layer norm of the vocoder and the mel decoder (what a native copy of them uses).
pub const NORM_EPSILON: f64 = 1e-6;

/// Vocos vocoder configuration: mel front end, iSTFT framing and backbone size.
#[derive(Config, Debug, PartialEq)]
pub struct VocosConfig {
    /// Sample rate in Hz.
    #[config(default = 16000)]
    pub sample_rate: u32,
    /// FFT size of the mel front end and of the iSTFT head.
    #[config(default = 1024)]
    pub n_fft: usize,
    /// Hop in samples (one mel frame = `hop_length` output samples).
    #[config(default = 256)]
    pub hop_length: usize,
    /// Hann window length (`<= n_fft`).
    #[config(default = 1024)]
    pub win_length: usize,
    /// Mel bands of the input.
    #[config(default = 80)]
    pub n_mels: usize,
    /// Lowest mel band edge in Hz.
    #[config(default = 0.0)]
    pub fmin: f32,
    /// Highest mel band edge in Hz; `None` means `sample_rate / 2`.
    #[config(default = "None")]
    pub fmax: Option<f32>,
    /// Floor applied before the natural log of the mel spectrogram.
    #[config(default = 1e-5)]
    pub log_floor: f32,
    /// Backbone width.
    #[config(default = 512)]
    pub dim: usize,
    /// Width of the ConvNeXt pointwise expansion (Vocos uses 3 × `dim`).
    #[config(default = 1536)]
    pub intermediate_dim: usize,
    /// Number of ConvNeXt blocks.
    #[config(default = 8)]
    pub n_layers: usize,
    /// Depthwise convolution kernel size (odd).
    #[config(default = 7)]
    pub kernel_size: usize,
    /// Initial value of every layer-scale γ (Vocos: `1 / n_layers`).
    #[config(default = 0.125)]
    pub layer_scale_init: f32,
    /// Largest predicted magnitude: `|X| = min(e^{log|X|}, max_magnitude)`.
    #[config(default = 100.0)]
    pub max_magnitude: f32,
    /// How synthesis renders the predicted spectrum: Griffin-Lim iterations from the predicted
    /// phase ([`crate::vocoder::refine_phase`]); `None` (the default, and what a config.json
    /// without the field reads as): none. Not used in training.
    #[config(default = "None")]
    pub phase_refinement: Option<PhaseRefinement>,
}

impl VocosConfig {
    /// Tiny model for tests: 16 kHz, `n_fft` 256, hop 64, 20 mels, width 32, 2 blocks.
    pub fn tiny() -> Self {
        Self::new()
            .with_n_fft(256)
            .with_hop_length(64)
            .with_win_length(256)
            .with_n_mels(20)
            .with_dim(32)
            .with_intermediate_dim(96)
            .with_n_layers(2)
            .with_layer_scale_init(0.5)
    }

    /// 16 kHz at 62.5 frames per second: `n_fft` 1024, hop 256, 80 mels, width 256, 4 blocks.
    pub fn hop256() -> Self {
        Self::new()
            .with_dim(256)
            .with_intermediate_dim(768)
            .with_n_layers(4)
            .with_layer_scale_init(0.25)
    }

    /// 16 kHz at 100 frames per second (the mel rate SoCodec's decoder predicts): `n_fft` 640,
    /// hop 160, window 640, 80 mels, width 192, 4 blocks (about 1.2 M parameters).
    pub fn hop160() -> Self {
        Self::new()
            .with_n_fft(640)
            .with_hop_length(160)
            .with_win_length(640)
            .with_dim(192)
            .with_intermediate_dim(576)
            .with_n_layers(4)
            .with_layer_scale_init(0.25)
    }

    /// Vocos' published 24 kHz (LibriTTS) size: `n_fft` 1024, hop 256, 100 mels, width 512,
    /// 8 blocks.
    pub fn base() -> Self {
        Self::new().with_sample_rate(24000).with_n_mels(100)
    }

    /// The mel front end whose output the vocoder takes (magnitude mel, natural log).
    pub fn mel_config(&self) -> MelConfig {
        MelConfig {
            sample_rate: self.sample_rate,
            n_fft: self.n_fft,
            hop_length: self.hop_length,
            win_length: self.win_length,
            n_mels: self.n_mels,
            fmin: self.fmin,
            fmax: self.fmax,
            power: 1.0,
            center: true,
            log_floor: self.log_floor,
        }
    }

    /// The iSTFT framing of the head.
    pub fn stft_config(&self) -> StftConfig {
        self.mel_config().stft_config()
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] naming the first bad field, or [`VocoderError::Audio`]
    /// for a mel setting the front end rejects.
    pub fn validate(&self) -> Result<(), VocoderError> {
        self.mel_config().validate()?;
        let bad = |field, reason: String| Err(VocoderError::InvalidConfig { field, reason });
        if self.hop_length > self.n_fft / 2 {
            return bad(
                "hop_length",
                format!(
                    "must be at most n_fft / 2 = {} so F · hop samples are covered, got {}",
                    self.n_fft / 2,
                    self.hop_length
                ),
            );
        }
        for (field, v) in [
            ("dim", self.dim),
            ("intermediate_dim", self.intermediate_dim),
            ("n_layers", self.n_layers),
        ] {
            if v == 0 {
                return bad(field, "must be positive".into());
            }
        }
        if self.kernel_size.is_multiple_of(2) {
            return bad(
                "kernel_size",
                format!("must be odd, got {}", self.kernel_size),
            );
        }
        if !(self.max_magnitude.is_finite() && self.max_magnitude > 0.0) {
            return bad(
                "max_magnitude",
                format!("must be positive, got {}", self.max_magnitude),
            );
        }
        Ok(())
    }

    /// Builds the vocoder on `device`.
    ///
    /// # Errors
    /// As [`VocosConfig::validate`].
    pub fn init(&self, device: &Device) -> Result<Vocos, VocoderError> {
        self.validate()?;
        let pad = PaddingConfig1d::Explicit(self.kernel_size / 2, self.kernel_size / 2);
        let n_bins = self.n_fft / 2 + 1;
        let blocks = (0..self.n_layers)
            .map(|_| {
                ConvNextBlock::new(
                    self.dim,
                    self.intermediate_dim,
                    self.kernel_size,
                    self.layer_scale_init,
                    device,
                )
            })
            .collect();
        Ok(Vocos {
            embed: Conv1dConfig::new(self.n_mels, self.dim, self.kernel_size)
                .with_padding(pad)
                .init(device),
            norm: LayerNormConfig::new(self.dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            blocks,
            final_norm: LayerNormConfig::new(self.dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            head: LinearConfig::new(self.dim, 2 * n_bins).init(device),
            n_mels: self.n_mels,
            hop_length: self.hop_length,
            log_max_magnitude: f64::from(self.max_magnitude).ln(),
        })
    }
}

/// One ConvNeXt block (Liu et al. 2022, adapted to 1-D by Vocos).
#[derive(Module, Debug)]
pub struct ConvNextBlock {
    /// Depthwise convolution over time.
    pub dwconv: Conv1d,
    /// LayerNorm over channels.
    pub norm: LayerNorm,
    /// Pointwise expansion `dim → intermediate_dim`.
    pub up: Linear,
    /// Pointwise projection `intermediate_dim → dim`.
    pub down: Linear,
    /// Layer scale γ, `[dim]`.
    pub gamma: Param<Tensor<1>>,
}

impl ConvNextBlock {
    /// A block of width `dim`, pointwise expansion `intermediate_dim`, depthwise kernel
    /// `kernel_size` (odd; "same" padding) and layer scale γ initialised to `layer_scale`.
    pub fn new(
        dim: usize,
        intermediate_dim: usize,
        kernel_size: usize,
        layer_scale: f32,
        device: &Device,
    ) -> Self {
        let pad = PaddingConfig1d::Explicit(kernel_size / 2, kernel_size / 2);
        Self {
            dwconv: Conv1dConfig::new(dim, dim, kernel_size)
                .with_groups(dim)
                .with_padding(pad)
                .init(device),
            norm: LayerNormConfig::new(dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            up: LinearConfig::new(dim, intermediate_dim).init(device),
            down: LinearConfig::new(intermediate_dim, dim).init(device),
            gamma: Param::from_tensor(Tensor::full([dim], layer_scale, device)),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, dim, frames]`
    /// - output: `[batch, dim, frames]`
    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = self.dwconv.forward(x.clone()).swap_dims(1, 2); // [batch, frames, dim]
        let h = self
            .down
            .forward(gelu(self.up.forward(self.norm.forward(h))));
        let gamma = self.gamma.val().unsqueeze_dim::<2>(0).unsqueeze_dim::<3>(0); // [1, 1, dim]
        x + (h * gamma).swap_dims(1, 2) // [batch, dim, frames]
    }
}

/// The Vocos vocoder: log-mel in, waveform out. The iSTFT kernels are not parameters: build a
/// [`TensorStft`] with [`Vocos::istft`] (or reuse one) and pass it to [`Vocos::forward`].
#[derive(Module, Debug)]
pub struct Vocos {
    /// Input embedding `n_mels → dim`.
    pub embed: Conv1d,
    /// LayerNorm after the embedding.
    pub norm: LayerNorm,
    /// The ConvNeXt backbone.
    pub blocks: Vec<ConvNextBlock>,
    /// LayerNorm before the head.
    pub final_norm: LayerNorm,
    /// Head `dim → 2 · n_bins` (log-magnitude, then phase).
    pub head: Linear,
    /// Mel bands expected at the input.
    n_mels: usize,
    /// Samples per frame.
    hop_length: usize,
    /// `ln(max_magnitude)`.
    log_max_magnitude: f64,
}

impl Vocos {
    /// The iSTFT matching this model's config, on `device`.
    ///
    /// # Errors
    /// As [`TensorStft::new`].
    pub fn istft(config: &VocosConfig, device: &Device) -> Result<TensorStft, VocoderError> {
        TensorStft::new(config.stft_config(), device)
    }

    /// Mel bands of the input.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Samples per input frame.
    pub fn hop_length(&self) -> usize {
        self.hop_length
    }

    /// The head's log-magnitude (clamped to `ln(max_magnitude)`) and phase (radians, not
    /// wrapped).
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]`
    /// - output: two `[batch, n_bins, frames]`
    ///
    /// # Errors
    /// [`VocoderError::Shape`] when the input has the wrong number of mel bands or no frames.
    pub fn log_magnitude_phase(
        &self,
        log_mel: Tensor<3>,
    ) -> Result<(Tensor<3>, Tensor<3>), VocoderError> {
        let [batch, n_mels, frames] = log_mel.dims();
        if n_mels != self.n_mels || frames == 0 {
            return Err(VocoderError::Shape {
                what: "vocoder log-mel input",
                expected: format!("[batch, {}, frames >= 1]", self.n_mels),
                found: vec![batch, n_mels, frames],
            });
        }
        let x = self.embed.forward(log_mel); // [batch, dim, frames]
        let x = self.norm.forward(x.swap_dims(1, 2)).swap_dims(1, 2);
        let x = self.blocks.iter().fold(x, |x, block| block.forward(x));
        let x = self.final_norm.forward(x.swap_dims(1, 2)); // [batch, frames, dim]
        let out = self.head.forward(x).swap_dims(1, 2); // [batch, 2 · n_bins, frames]
        let n_bins = out.dims()[1] / 2;
        let log_mag = out
            .clone()
            .slice([0..batch, 0..n_bins, 0..frames])
            .clamp_max(self.log_max_magnitude);
        let phase = out.slice([0..batch, n_bins..2 * n_bins, 0..frames]);
        Ok((log_mag, phase))
    }

    /// The complex spectrum the head predicts.
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]`
    /// - output: `[batch, 2 · n_bins, frames]` (real parts, then imaginary parts)
    ///
    /// # Errors
    /// [`VocoderError::Shape`] when the input has the wrong number of mel bands or no frames.
    pub fn spectrum(&self, log_mel: Tensor<3>) -> Result<Tensor<3>, VocoderError> {
        let (log_mag, phase) = self.log_magnitude_phase(log_mel)?;
        Ok(complex(log_mag, phase))
    }

    /// A waveform and the phase it was made from.
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]`
    /// - output: `[batch, frames · hop_length]` and `[batch, n_bins, frames]`
    ///
    /// # Errors
    /// As [`Vocos::forward`].
    pub fn forward_with_phase(
        &self,
        log_mel: Tensor<3>,
        istft: &TensorStft,
    ) -> Result<(Tensor<2>, Tensor<3>), VocoderError> {
        let frames = log_mel.dims()[2];
        let (log_mag, phase) = self.log_magnitude_phase(log_mel)?;
        let wave = istft.inverse(complex(log_mag, phase.clone()), frames * self.hop_length)?;
        Ok((wave, phase))
    }

    /// Synthesises a waveform.
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]`
    /// - output: `[batch, frames · hop_length]`
    ///
    /// # Errors
    /// As [`Vocos::spectrum`]; [`VocoderError::Shape`] when `istft` was built for another `n_fft`.
    pub fn forward(
        &self,
        log_mel: Tensor<3>,
        istft: &TensorStft,
    ) -> Result<Tensor<2>, VocoderError> {
        let frames = log_mel.dims()[2];
        let spec = self.spectrum(log_mel)?;
        istft.inverse(spec, frames * self.hop_length)
    }
}

/// `[batch, n_bins, frames]` log-magnitude and phase → `[batch, 2 · n_bins, frames]` real
/// parts, then imaginary parts.
fn complex(log_mag: Tensor<3>, phase: Tensor<3>) -> Tensor<3> {
    let mag = log_mag.exp();
    let re = mag.clone() * phase.clone().cos();
    let im = mag * phase.sin();
    Tensor::cat(vec![re, im], 1)
}
