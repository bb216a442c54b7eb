//! A differentiable STFT and iSTFT made of Burn tensor ops, with `voxspec_audio::Stft`'s
//! conventions (librosa: periodic Hann window of `win_length` centred in `n_fft`, frames centred
//! on `t * hop` with `n_fft / 2` zeros of padding on both sides).
//!
//! No FFT is involved, so every backend (and autodiff) runs it, and Burn's `signal` feature is
//! not needed:
//!
//! ```text
//! forward:  x [B, S] ─pad n_fft/2─▶ conv1d(stride hop, kernels = window · DFT rows)
//!           ─▶ [B, 2·n_bins, F]   (channels: real bins 0..n_bins, then imaginary bins)
//! inverse:  [B, 2·n_bins, F] ─conv_transpose1d(stride hop, kernels = window · inverse-DFT rows)
//!           = overlap-add of windowed inverse frames ─▶ ÷ Σ_t w²(n − t·hop) ─trim─▶ [B, length]
//! ```
//!
//! The inverse-DFT kernels carry the one-sided weights (1 for DC and Nyquist, 2 elsewhere) and
//! `1 / n_fft`, so the imaginary parts of DC and Nyquist are ignored as in `numpy.fft.irfft`.

use std::f64::consts::PI;

use burn::tensor::module::{conv_transpose1d, conv1d};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_audio::{StftConfig, hann_window};

use crate::error::VocoderError;

/// Smallest summed squared window a sample is divided by; below it the sample is left as is
/// (only the outermost samples of an uncovered edge).
const WSUM_FLOOR: f32 = 1e-8;

/// A planned tensor STFT: analysis and synthesis kernels for one [`StftConfig`] on one device.
#[derive(Debug, Clone)]
pub struct TensorStft {
    cfg: StftConfig,
    /// Squared analysis window, length `n_fft` (for the overlap-add normalisation).
    window_sq: Vec<f32>,
    /// `[2·n_bins, 1, n_fft]`: windowed cosine rows, then windowed negative sine rows.
    analysis: Tensor<3>,
    /// `[2·n_bins, 1, n_fft]`: windowed inverse-DFT rows for the real, then imaginary parts.
    synthesis: Tensor<3>,
}

impl TensorStft {
    /// Validates `cfg` and builds the kernels on `device`.
    ///
    /// # Errors
    /// [`VocoderError::Audio`] naming the bad field of `cfg`, or [`VocoderError::InvalidConfig`]
    /// when `center` is false (the vocoder's framing is always centred).
    pub fn new(cfg: StftConfig, device: &Device) -> Result<Self, VocoderError> {
        cfg.validate()?;
        if !cfg.center {
            return Err(VocoderError::InvalidConfig {
                field: "center",
                reason: "the tensor STFT supports centred frames only".into(),
            });
        }
        let n_fft = cfg.n_fft;
        let n_bins = cfg.n_bins();
        let window = hann_window(cfg.win_length, n_fft);
        let mut analysis = vec![0.0f32; 2 * n_bins * n_fft];
        let mut synthesis = vec![0.0f32; 2 * n_bins * n_fft];
        for k in 0..n_bins {
            // One-sided weight of bin k in the inverse transform.
            let weight = if k == 0 || (n_fft.is_multiple_of(2) && k == n_fft / 2) {
                1.0
            } else {
                2.0
            };
            for n in 0..n_fft {
                // (k·n) mod n_fft keeps the angle small and the f64 phase exact.
                let angle = 2.0 * PI * ((k * n) % n_fft) as f64 / n_fft as f64;
                let (s, c) = angle.sin_cos();
                let w = f64::from(window[n]);
                analysis[k * n_fft + n] = (w * c) as f32;
                analysis[(n_bins + k) * n_fft + n] = (-w * s) as f32;
                let scale = weight / n_fft as f64 * w;
                synthesis[k * n_fft + n] = (scale * c) as f32;
                synthesis[(n_bins + k) * n_fft + n] = (-scale * s) as f32;
            }
        }
        let shape = [2 * n_bins, 1, n_fft];
        Ok(Self {
            cfg,
            window_sq: window.iter().map(|w| w * w).collect(),
            analysis: Tensor::from_data(TensorData::new(analysis, shape), device),
            synthesis: Tensor::from_data(TensorData::new(synthesis, shape), device),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StftConfig {
        &self.cfg
    }

    /// Number of bins, `n_fft / 2 + 1`.
    pub fn n_bins(&self) -> usize {
        self.cfg.n_bins()
    }

    /// Complex STFT as stacked real and imaginary parts.
    ///
    /// # Shapes
    /// - `x`: `[batch, samples]`
    /// - output: `[batch, 2 · n_bins, frames]`, `frames = 1 + samples / hop`; channels
    ///   `0..n_bins` are real parts, `n_bins..` imaginary parts.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<3> {
        let pad = self.cfg.n_fft / 2;
        let x = x.unsqueeze_dim::<3>(1); // [batch, 1, samples]
        conv1d(
            x,
            self.analysis.clone(),
            None,
            ConvOptions::new([self.cfg.hop_length], [pad], [1], 1),
        )
    }

    /// Magnitude STFT, `sqrt(re² + im² + eps)` (the `eps` keeps the gradient finite at 0).
    ///
    /// # Shapes
    /// - `x`: `[batch, samples]`
    /// - output: `[batch, n_bins, frames]`
    pub fn magnitude(&self, x: Tensor<2>, eps: f64) -> Tensor<3> {
        let n_bins = self.n_bins();
        let spec = self.forward(x);
        let [batch, _, frames] = spec.dims();
        let re = spec.clone().slice([0..batch, 0..n_bins, 0..frames]);
        let im = spec.slice([0..batch, n_bins..2 * n_bins, 0..frames]);
        (re.powi_scalar(2) + im.powi_scalar(2))
            .add_scalar(eps)
            .sqrt()
    }

    /// Inverse STFT (weighted overlap-add divided by the summed squared window, as
    /// `voxspec_audio::Stft::inverse` and `librosa.istft`), trimmed or zero-padded to `length`
    /// samples after removing the centring pad.
    ///
    /// # Shapes
    /// - `spec`: `[batch, 2 · n_bins, frames]` as from [`TensorStft::forward`]
    /// - output: `[batch, length]`
    ///
    /// # Errors
    /// [`VocoderError::Shape`] when the channel count is not `2 · n_bins` or there are no frames.
    pub fn inverse(&self, spec: Tensor<3>, length: usize) -> Result<Tensor<2>, VocoderError> {
        let [batch, channels, frames] = spec.dims();
        let n_bins = self.n_bins();
        if channels != 2 * n_bins || frames == 0 {
            return Err(VocoderError::Shape {
                what: "iSTFT input",
                expected: format!("[batch, {}, frames >= 1]", 2 * n_bins),
                found: vec![batch, channels, frames],
            });
        }
        let (n_fft, hop) = (self.cfg.n_fft, self.cfg.hop_length);
        let pad = n_fft / 2;
        let full = n_fft + hop * (frames - 1);
        let device = spec.device();
        // [batch, 1, full]: overlap-added windowed inverse frames.
        let y = conv_transpose1d(
            spec,
            self.synthesis.clone(),
            None,
            ConvTransposeOptions::new([hop], [0], [0], [1], 1),
        );
        let kept = length.min(full.saturating_sub(pad));
        let inv = self.inverse_window_sum(frames, pad, kept);
        let inv = Tensor::<1>::from_data(TensorData::new(inv, [kept]), &device);
        // [batch, 1, full] -> [batch, kept]
        let y = y
            .slice([0..batch, 0..1, pad..pad + kept])
            .reshape([batch, kept])
            * inv.unsqueeze_dim::<2>(0);
        if kept < length {
            let zeros = Tensor::<2>::zeros([batch, length - kept], &device);
            Ok(Tensor::cat(vec![y, zeros], 1))
        } else {
            Ok(y)
        }
    }

    /// `1 / Σ_t w²(n − t·hop)` for output samples `pad..pad + kept` (1 where the sum is ~0).
    fn inverse_window_sum(&self, frames: usize, pad: usize, kept: usize) -> Vec<f32> {
        let hop = self.cfg.hop_length;
        let full = self.cfg.n_fft + hop * (frames - 1);
        let mut wsum = vec![0.0f32; full];
        for t in 0..frames {
            for (i, w2) in self.window_sq.iter().enumerate() {
                wsum[t * hop + i] += w2;
            }
        }
        wsum[pad..pad + kept]
            .iter()
            .map(|&w| if w > WSUM_FLOOR { 1.0 / w } else { 1.0 })
            .collect()
    }
}
