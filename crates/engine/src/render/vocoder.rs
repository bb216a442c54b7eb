//! The Vocos vocoder (`voxspec_codec::Vocos`) on the engine's layers, with the inverse STFT
//! by FFT (`voxspec_audio::Stft::inverse`) in place of Burn's overlap-add convolution.

use voxspec_audio::{Complex, Spectrogram, Stft};
use voxspec_codec::vocoder::{Vocoder, VocosConfig};

use super::layers::{Conv, ConvNext, Scratch, layer_norm, packed};
use crate::error::{EngineError, Result};
use crate::matmul::{PackedLinear, WeightFormat};
use crate::ops::NormWeights;

/// The vocoder with its parameters copied out of Burn.
#[derive(Debug, Clone)]
pub struct NativeVocoder {
    n_mels: usize,
    hop: usize,
    log_max_magnitude: f32,
    embed: Conv,
    norm: NormWeights,
    blocks: Vec<ConvNext>,
    final_norm: NormWeights,
    /// `dim → 2 · n_bins`: log-magnitudes, then phases.
    head: PackedLinear,
    stft: Stft,
}

impl NativeVocoder {
    /// Copies a loaded vocoder, its linear and convolution weights stored as `format`.
    ///
    /// # Errors
    /// [`EngineError::Model`] for a vocoder that refines its phase by Griffin-Lim (its
    /// iterations run on Burn) or a layer the engine does not run; [`EngineError::Parameter`]
    /// when a tensor cannot be read.
    pub fn from_burn(vocoder: &Vocoder, format: WeightFormat) -> Result<Self> {
        let config: &VocosConfig = vocoder.config();
        if vocoder.phase_refinement().iterations > 0 {
            return Err(EngineError::Model {
                detail: "a vocoder with phase refinement runs on Burn".into(),
            });
        }
        let model = vocoder.model();
        let stft = Stft::new(config.stft_config()).map_err(|e| EngineError::Model {
            detail: format!("the vocoder's iSTFT: {e}"),
        })?;
        let head = packed(&model.head, "head", format)?;
        if head.out_features() != 2 * config.stft_config().n_bins() {
            return Err(EngineError::Model {
                detail: format!(
                    "the vocoder head predicts {} values a frame, not 2 · {} bins",
                    head.out_features(),
                    config.stft_config().n_bins()
                ),
            });
        }
        Ok(Self {
            n_mels: config.n_mels,
            hop: config.hop_length,
            log_max_magnitude: config.max_magnitude.ln(),
            embed: Conv::from_burn(&model.embed, "embed", format)?,
            norm: layer_norm(&model.norm, "norm")?,
            blocks: model
                .blocks
                .iter()
                .enumerate()
                .map(|(i, b)| ConvNext::from_burn(b, &format!("blocks.{i}"), format))
                .collect::<Result<Vec<_>>>()?,
            final_norm: layer_norm(&model.final_norm, "final_norm")?,
            head,
            stft,
        })
    }

    /// Mel bands of the input.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Samples per frame.
    pub fn hop_length(&self) -> usize {
        self.hop
    }

    /// Samples of a log-mel.
    ///
    /// # Shapes
    /// `log_mel: [frames, n_mels]` row-major → `[frames · hop_length]`
    ///
    /// # Errors
    /// [`EngineError::Input`] when `log_mel` is not `frames ≥ 1` rows of `n_mels`.
    pub fn synthesize(&self, log_mel: &[f32], frames: usize) -> Result<Vec<f32>> {
        if frames == 0 || log_mel.len() != frames * self.n_mels {
            return Err(EngineError::Input {
                detail: format!(
                    "vocoder log-mel: expected [frames >= 1, {}], got {} values for {frames} frames",
                    self.n_mels,
                    log_mel.len()
                ),
            });
        }
        let dim = self.embed.c_out();
        let (mut cols, mut h) = (Vec::new(), vec![0.0f32; frames * dim]);
        self.embed.forward(log_mel, frames, &mut cols, &mut h);
        let mut x = vec![0.0f32; frames * dim];
        self.norm.forward(&h, &mut x);
        let mut s = Scratch::default();
        for block in &self.blocks {
            block.forward(&mut x, frames, &mut s);
        }
        self.final_norm.forward(&x, &mut h);
        let width = self.head.out_features();
        let mut out = vec![0.0f32; frames * width];
        self.head.forward(&h, frames, &mut out);
        let n_bins = width / 2;
        let mut data = Vec::with_capacity(frames * n_bins);
        for row in out.chunks_exact(width) {
            let (log_mag, phase) = row.split_at(n_bins);
            data.extend(log_mag.iter().zip(phase).map(|(&m, &p)| {
                let mag = m.min(self.log_max_magnitude).exp();
                let (sin, cos) = p.sin_cos();
                Complex::new(mag * cos, mag * sin)
            }));
        }
        let spec = Spectrogram {
            n_frames: frames,
            n_bins,
            data,
        };
        Ok(self.stft.inverse(&spec, Some(frames * self.hop)))
    }
}
