//! The CTC teacher's acoustic front end: 80-band log-mel at 100 Hz (16 kHz audio, hop 160,
//! 25 ms Hann window in a 512-point FFT, power spectrum, natural log) from `voxspec-audio`,
//! then per-utterance mean and variance normalisation of every band (CMVN).
//!
//! Frame arithmetic (centred STFT): `frames_100hz = samples / hop + 1`; the model's stride-2
//! subsampling then gives `frames_50hz = (frames_100hz + 1) / 2`, i.e. 51 frames per second of
//! audio plus the edge frames (16000 samples → 101 → 51).

use burn::config::Config;
use voxspec_audio::{LogMel, MelConfig};

use crate::error::TeacherError;

/// Settings of the log-mel front end.
#[derive(Config, Debug, PartialEq)]
pub struct FrontendConfig {
    /// Sample rate (Hz) the waveform must have.
    #[config(default = 16000)]
    pub sample_rate: u32,
    /// FFT size.
    #[config(default = 512)]
    pub n_fft: usize,
    /// Analysis window (Hann) in samples.
    #[config(default = 400)]
    pub win_length: usize,
    /// Hop between frames in samples (160 at 16 kHz: 100 frames per second).
    #[config(default = 160)]
    pub hop_length: usize,
    /// Mel bands.
    #[config(default = 80)]
    pub n_mels: usize,
    /// Floor of the power mel spectrum before the log.
    #[config(default = 1e-10)]
    pub log_floor: f32,
    /// Normalise each band to zero mean and unit variance over the utterance.
    #[config(default = true)]
    pub normalize: bool,
}

/// Variance floor of the per-utterance normalisation (a silent band stays finite).
const CMVN_EPS: f32 = 1e-5;

/// A planned front end (STFT plan and filterbank built once).
#[derive(Debug, Clone)]
pub struct Frontend {
    config: FrontendConfig,
    mel: LogMel,
}

impl FrontendConfig {
    /// The `voxspec-audio` log-mel settings.
    pub fn mel_config(&self) -> MelConfig {
        MelConfig {
            sample_rate: self.sample_rate,
            n_fft: self.n_fft,
            hop_length: self.hop_length,
            win_length: self.win_length,
            n_mels: self.n_mels,
            fmin: 0.0,
            fmax: None,
            power: 2.0,
            center: true,
            log_floor: self.log_floor,
        }
    }

    /// Plans the front end.
    ///
    /// # Errors
    /// [`TeacherError::Audio`] when the mel settings are invalid.
    pub fn init(&self) -> Result<Frontend, TeacherError> {
        Ok(Frontend {
            config: self.clone(),
            mel: LogMel::new(self.mel_config())?,
        })
    }
}

impl Frontend {
    /// The configuration.
    pub fn config(&self) -> &FrontendConfig {
        &self.config
    }

    /// Mel bands per frame.
    pub fn n_mels(&self) -> usize {
        self.config.n_mels
    }

    /// Frames (100 Hz at the defaults) for a waveform of `samples` samples.
    pub fn num_frames(&self, samples: usize) -> usize {
        self.mel.n_frames(samples)
    }

    /// Normalised log-mel features of one waveform.
    ///
    /// # Shapes
    /// `wave: [samples]` at [`FrontendConfig::sample_rate`] → `[frames, n_mels]` row-major,
    /// `frames = self.num_frames(samples)`.
    pub fn features(&self, wave: &[f32]) -> Vec<f32> {
        self.features_and_levels(wave).0
    }

    /// The features of [`Frontend::features`] and each frame's level before normalisation:
    /// the total mel power in dB (`10 log10 Σ_bands exp(log-mel)`).
    ///
    /// # Shapes
    /// `wave: [samples]` → (`[frames, n_mels]`, `[frames]`).
    pub fn features_and_levels(&self, wave: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let mut feats = self.mel.compute(wave);
        let levels = feats
            .chunks_exact(self.config.n_mels.max(1))
            .map(|row| {
                let power: f64 = row.iter().map(|&v| f64::from(v).exp()).sum();
                (10.0 * power.max(1e-30).log10()) as f32
            })
            .collect();
        if self.config.normalize {
            cmvn(&mut feats, self.config.n_mels);
        }
        (feats, levels)
    }
}

/// Per-band mean and variance normalisation of a `[frames, bands]` row-major matrix.
fn cmvn(feats: &mut [f32], bands: usize) {
    let frames = feats.len() / bands.max(1);
    if frames == 0 {
        return;
    }
    let mut mean = vec![0.0f64; bands];
    let mut sq = vec![0.0f64; bands];
    for row in feats.chunks_exact(bands) {
        for ((m, s), &v) in mean.iter_mut().zip(sq.iter_mut()).zip(row) {
            *m += f64::from(v);
            *s += f64::from(v) * f64::from(v);
        }
    }
    let n = frames as f64;
    let scale: Vec<(f32, f32)> = mean
        .iter()
        .zip(&sq)
        .map(|(&m, &s)| {
            let mu = m / n;
            let var = (s / n - mu * mu).max(0.0) as f32;
            (mu as f32, 1.0 / (var + CMVN_EPS).sqrt())
        })
        .collect();
    for row in feats.chunks_exact_mut(bands) {
        for (v, &(mu, inv)) in row.iter_mut().zip(&scale) {
            *v = (*v - mu) * inv;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_normalisation() {
        let frontend = FrontendConfig::new().init().unwrap();
        assert_eq!(frontend.num_frames(16000), 101);
        let wave: Vec<f32> = (0..8000)
            .map(|i| 0.3 * (i as f32 * 0.07).sin() + 0.05 * (i as f32 * 1.3).cos())
            .collect();
        let feats = frontend.features(&wave);
        assert_eq!(feats.len(), frontend.num_frames(8000) * 80);
        for band in [0, 10, 40, 79] {
            let col: Vec<f32> = feats.iter().skip(band).step_by(80).copied().collect();
            let mean = col.iter().sum::<f32>() / col.len() as f32;
            let var = col.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / col.len() as f32;
            assert!(mean.abs() < 1e-3, "band {band}: mean {mean}");
            assert!(
                (var - 1.0).abs() < 1e-2 || var < 1e-3,
                "band {band}: var {var}"
            );
        }
    }
}
