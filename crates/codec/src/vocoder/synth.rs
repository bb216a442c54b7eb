//! Host-side synthesis with a trained vocoder: the vocoder's log-mel of a waveform
//! ([`vocoder_log_mel`]), log-mel host samples → waveform samples ([`Vocos::synthesize`]), and
//! [`Vocoder`], a loaded model with its config and iSTFT for callers that only hold samples
//! (SoCodec's mel decoder, evaluation, the CLI).
//!
//! Host log-mels are frame-major, `[frames, n_mels]` row-major, the layout of
//! `voxspec_audio::LogMel::compute` and of [`crate::vocoder::griffin_lim_from_log_mel`].

use std::path::Path;

use burn::tensor::{Device, Tensor, TensorData};
use voxspec_audio::{Complex, LogMel, Spectrogram, Stft};

use crate::error::VocoderError;
use crate::vocoder::griffin_lim::{
    GriffinLimConfig, MelInverse, PhaseRefinement, check_momentum, griffin_lim_from_log_mel,
    refine_phase,
};
use crate::vocoder::model::{Vocos, VocosConfig};
use crate::vocoder::stft::TensorStft;
use crate::vocoder::train::load_vocoder;

/// The log-mel the vocoder of `config` takes, of `samples` at `sample_rate`.
///
/// # Shapes
/// `samples: [n]` → `([frames, n_mels]` row-major, `frames`) with `frames = 1 + n / hop`
/// (centred frames).
///
/// # Errors
/// [`VocoderError::SampleRate`] when `sample_rate` is not the vocoder's;
/// [`VocoderError::Shape`] for empty audio; [`VocoderError::Audio`] for a bad mel config.
pub fn vocoder_log_mel(
    config: &VocosConfig,
    samples: &[f32],
    sample_rate: u32,
) -> Result<(Vec<f32>, usize), VocoderError> {
    if sample_rate != config.sample_rate {
        return Err(VocoderError::SampleRate {
            expected: config.sample_rate,
            found: sample_rate,
        });
    }
    if samples.is_empty() {
        return Err(VocoderError::Shape {
            what: "vocoder input audio",
            expected: "[samples >= 1]".into(),
            found: vec![0],
        });
    }
    let front = LogMel::new(config.mel_config())?;
    let mel = front.compute(samples);
    let frames = mel.len() / config.n_mels;
    Ok((mel, frames))
}

impl Vocos {
    /// Synthesises host samples from a host log-mel.
    ///
    /// # Shapes
    /// - `log_mel`: `[frames, n_mels]` row-major (frame-major, as `LogMel::compute` writes)
    /// - output: `[frames · hop_length]`
    ///
    /// # Errors
    /// [`VocoderError::Shape`] when `n_mels` is not the model's, `frames` is 0 or
    /// `log_mel.len() != frames · n_mels`; as [`Vocos::forward`] otherwise.
    pub fn synthesize(
        &self,
        istft: &TensorStft,
        log_mel: &[f32],
        n_mels: usize,
        frames: usize,
        device: &Device,
    ) -> Result<Vec<f32>, VocoderError> {
        let x = self.host_input(log_mel, n_mels, frames, device)?;
        let wave = self.forward(x, istft)?; // [1, frames · hop]
        read(wave, "vocoder waveform")
    }

    /// The complex spectrum the head predicts for a host log-mel, as a host spectrogram.
    ///
    /// # Shapes
    /// - `log_mel`: `[frames, n_mels]` row-major
    /// - output: `[frames, n_bins]`
    ///
    /// # Errors
    /// As [`Vocos::synthesize`].
    pub fn host_spectrum(
        &self,
        log_mel: &[f32],
        n_mels: usize,
        frames: usize,
        device: &Device,
    ) -> Result<Spectrogram, VocoderError> {
        let x = self.host_input(log_mel, n_mels, frames, device)?;
        let (log_mag, phase) = self.log_magnitude_phase(x)?; // [1, n_bins, frames] each
        let n_bins = log_mag.dims()[1];
        let log_mag = read(log_mag, "vocoder log-magnitude")?;
        let phase = read(phase, "vocoder phase")?;
        let mut data = vec![Complex::new(0.0f32, 0.0); frames * n_bins];
        for k in 0..n_bins {
            for t in 0..frames {
                let (m, p) = (log_mag[k * frames + t].exp(), phase[k * frames + t]);
                data[t * n_bins + k] = Complex::from_polar(m, p);
            }
        }
        Ok(Spectrogram {
            n_frames: frames,
            n_bins,
            data,
        })
    }

    /// `[frames, n_mels]` host rows → a `[1, n_mels, frames]` tensor, checked.
    fn host_input(
        &self,
        log_mel: &[f32],
        n_mels: usize,
        frames: usize,
        device: &Device,
    ) -> Result<Tensor<3>, VocoderError> {
        if n_mels != self.n_mels() || frames == 0 || log_mel.len() != frames * n_mels {
            return Err(VocoderError::Shape {
                what: "vocoder log-mel (host, [frames, n_mels])",
                expected: format!("[frames >= 1, {0}] = frames · {0} values", self.n_mels()),
                found: vec![log_mel.len(), n_mels, frames],
            });
        }
        let mut channel_major = vec![0.0f32; log_mel.len()];
        for (t, row) in log_mel.chunks_exact(n_mels).enumerate() {
            for (m, &v) in row.iter().enumerate() {
                channel_major[m * frames + t] = v;
            }
        }
        Ok(Tensor::from_data(
            TensorData::new(channel_major, [1, n_mels, frames]),
            device,
        ))
    }
}

fn read<const D: usize>(t: Tensor<D>, what: &'static str) -> Result<Vec<f32>, VocoderError> {
    t.into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| VocoderError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}

/// A trained vocoder ready to synthesise: config, model and its iSTFT on one device.
#[derive(Debug)]
pub struct Vocoder {
    config: VocosConfig,
    model: Vocos,
    istft: TensorStft,
    /// The host STFT of the same framing and the mel's magnitude, for phase refinement.
    stft: Stft,
    mel_inverse: MelInverse,
    refinement: PhaseRefinement,
    device: Device,
}

impl Vocoder {
    /// Wraps a model built from `config`.
    ///
    /// # Errors
    /// As [`Vocos::istft`].
    pub fn new(config: VocosConfig, model: Vocos, device: &Device) -> Result<Self, VocoderError> {
        let istft = Vocos::istft(&config, device)?;
        let stft = Stft::new(config.stft_config())?;
        let refinement = config.phase_refinement.unwrap_or(PhaseRefinement::NONE);
        check_momentum("phase refinement momentum", refinement.momentum)?;
        let mel_inverse = MelInverse::new(&config.mel_config())?;
        Ok(Self {
            config,
            model,
            istft,
            stft,
            mel_inverse,
            refinement,
            device: device.clone(),
        })
    }

    /// Renders every later [`Vocoder::synthesize`] with `refinement` (see [`refine_phase`]); the
    /// config ([`Vocoder::config`]) records it.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] for a momentum outside `[0, 1)`.
    pub fn with_phase_refinement(
        mut self,
        refinement: PhaseRefinement,
    ) -> Result<Self, VocoderError> {
        check_momentum("phase refinement momentum", refinement.momentum)?;
        self.refinement = refinement;
        self.config.phase_refinement = Some(refinement);
        Ok(self)
    }

    /// The phase refinement [`Vocoder::synthesize`] applies.
    pub fn phase_refinement(&self) -> PhaseRefinement {
        self.refinement
    }

    /// Loads a vocoder model directory (`config.json` kind [`crate::vocoder::VOCODER_KIND`] +
    /// `model.safetensors`).
    ///
    /// # Errors
    /// The training crate's errors naming the missing or mismatching file or tensor.
    pub fn load(dir: &Path, device: &Device) -> voxspec_train::Result<Self> {
        let (config, model) = load_vocoder(dir, device)?;
        Self::new(config, model, device).map_err(voxspec_train::TrainError::task)
    }

    /// The model's configuration.
    pub fn config(&self) -> &VocosConfig {
        &self.config
    }

    /// The model.
    pub fn model(&self) -> &Vocos {
        &self.model
    }

    /// The vocoder's log-mel of `samples` at `sample_rate` (see [`vocoder_log_mel`]).
    ///
    /// # Errors
    /// As [`vocoder_log_mel`].
    pub fn log_mel(
        &self,
        samples: &[f32],
        sample_rate: u32,
    ) -> Result<(Vec<f32>, usize), VocoderError> {
        vocoder_log_mel(&self.config, samples, sample_rate)
    }

    /// Waveform of a host log-mel `[frames, n_mels]` (see [`Vocos::synthesize`]); output
    /// `[frames · hop_length]` samples at the vocoder's rate.
    ///
    /// # Errors
    /// As [`Vocos::synthesize`].
    pub fn synthesize(
        &self,
        log_mel: &[f32],
        n_mels: usize,
        frames: usize,
    ) -> Result<Vec<f32>, VocoderError> {
        if self.refinement.iterations == 0 {
            return self
                .model
                .synthesize(&self.istft, log_mel, n_mels, frames, &self.device);
        }
        // The vocoder's phase on the magnitude the log-mel stands for.
        let mut spectrum = self
            .model
            .host_spectrum(log_mel, n_mels, frames, &self.device)?;
        let magnitude = self.mel_inverse.magnitude(log_mel, frames);
        for (c, m) in spectrum.data.iter_mut().zip(magnitude) {
            let norm = c.norm();
            *c = if norm > 1e-12 {
                *c * (m / norm)
            } else {
                Complex::new(m, 0.0)
            };
        }
        refine_phase(
            &self.stft,
            spectrum,
            frames * self.config.hop_length,
            self.refinement.iterations,
            self.refinement.momentum,
        )
    }

    /// Analysis–resynthesis: log-mel of `samples`, then the vocoder, trimmed to the input
    /// length.
    ///
    /// # Shapes
    /// `samples: [n]` → `[n]`
    ///
    /// # Errors
    /// As [`vocoder_log_mel`] and [`Vocos::synthesize`].
    pub fn resynthesize(
        &self,
        samples: &[f32],
        sample_rate: u32,
    ) -> Result<Vec<f32>, VocoderError> {
        let (mel, frames) = self.log_mel(samples, sample_rate)?;
        let mut wave = self.synthesize(&mel, self.config.n_mels, frames)?;
        wave.truncate(samples.len());
        Ok(wave)
    }
}

/// Griffin-Lim analysis–resynthesis through the mel front end of `config` (the baseline a
/// trained vocoder is compared with): `[n]` samples → `[n]` samples (zero-padded when the
/// reconstruction is shorter).
///
/// # Errors
/// As [`vocoder_log_mel`] and [`griffin_lim_from_log_mel`].
pub fn griffin_lim_resynthesize(
    config: &VocosConfig,
    samples: &[f32],
    sample_rate: u32,
    gl: &GriffinLimConfig,
) -> Result<Vec<f32>, VocoderError> {
    let (mel, frames) = vocoder_log_mel(config, samples, sample_rate)?;
    let mut wave = griffin_lim_from_log_mel(&config.mel_config(), &mel, frames, gl)?.wave;
    wave.resize(samples.len(), 0.0);
    Ok(wave)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| 0.3 * (2.0 * std::f32::consts::PI * 220.0 * i as f32 / 16000.0).sin())
            .collect()
    }

    #[test]
    fn synthesize_gives_hop_samples_per_frame_and_resynthesis_keeps_the_length() {
        let device = Device::flex();
        let config = VocosConfig::tiny();
        let model = config.init(&device).unwrap();
        let vocoder = Vocoder::new(config.clone(), model, &device).unwrap();
        let samples = tone(1000);
        let (mel, frames) = vocoder.log_mel(&samples, 16000).unwrap();
        assert_eq!(frames, 1 + 1000 / config.hop_length);
        assert_eq!(mel.len(), frames * config.n_mels);
        let wave = vocoder.synthesize(&mel, config.n_mels, frames).unwrap();
        assert_eq!(wave.len(), frames * config.hop_length);
        assert!(wave.iter().all(|v| v.is_finite()));
        assert_eq!(vocoder.resynthesize(&samples, 16000).unwrap().len(), 1000);
    }

    #[test]
    fn wrong_mel_count_frames_or_rate_is_an_error() {
        let device = Device::flex();
        let config = VocosConfig::tiny();
        let model = config.init(&device).unwrap();
        let vocoder = Vocoder::new(config.clone(), model, &device).unwrap();
        let n = config.n_mels;
        let e = vocoder.synthesize(&vec![0.0; 5 * (n + 1)], n + 1, 5);
        assert!(matches!(e, Err(VocoderError::Shape { .. })), "{e:?}");
        assert!(vocoder.synthesize(&[], n, 0).is_err());
        assert!(vocoder.synthesize(&vec![0.0; 5 * n - 1], n, 5).is_err());
        let e = vocoder.resynthesize(&tone(500), 22050).unwrap_err();
        assert!(e.to_string().contains("22050"), "{e}");
        assert!(vocoder.resynthesize(&[], 16000).is_err());
    }

    #[test]
    fn a_saved_tiny_vocoder_loads_and_synthesises_the_same_samples() {
        let device = Device::flex();
        let config = VocosConfig::tiny();
        let model = config.init(&device).unwrap();
        let dir = tempfile::tempdir().unwrap();
        crate::vocoder::save_vocoder(dir.path(), &config, &model).unwrap();
        let a = Vocoder::new(config, model, &device).unwrap();
        let b = Vocoder::load(dir.path(), &device).unwrap();
        let samples = tone(2000);
        assert_eq!(
            a.resynthesize(&samples, 16000).unwrap(),
            b.resynthesize(&samples, 16000).unwrap()
        );
        let missing = Vocoder::load(&dir.path().join("nope"), &device).unwrap_err();
        assert!(missing.to_string().contains("nope"), "{missing}");
    }

    #[test]
    fn griffin_lim_resynthesis_keeps_the_length_and_follows_the_input() {
        let config = VocosConfig::tiny();
        let samples = tone(4000);
        let gl = GriffinLimConfig::default();
        let wave = griffin_lim_resynthesize(&config, &samples, 16000, &gl).unwrap();
        assert_eq!(wave.len(), samples.len());
        let energy = |x: &[f32]| x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32;
        let ratio = energy(&wave[500..3500]) / energy(&samples[500..3500]);
        assert!((0.3..3.0).contains(&ratio), "energy ratio {ratio}");
    }
}
