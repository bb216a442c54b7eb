//! Objective quality of a resynthesis: mel-cepstral distortion (MCD) between a reference
//! waveform and a codec's reconstruction of it, both at the same sample rate.
//!
//! This is an **MFCC-based** MCD. It is not the mel-cepstral distortion of Kubichek (1993) as
//! TTS papers usually compute it (SPTK `mcep`: all-pass warped cepstral analysis of the FFT
//! spectrum, α ≈ 0.42 at 16 kHz): its values are of the same order but not comparable number
//! for number with published SPTK MCDs. The exact definition:
//!
//! 1. Log mel spectrogram of each waveform with `voxspec-audio`'s [`LogMel`] (librosa
//!    conventions): Hann window of `window_ms` (25 ms) inside an FFT of the next power of two,
//!    hop `hop_ms` (10 ms), centred frames with zero padding, magnitude spectrum (power 1),
//!    `n_mels` (80) Slaney bands over 0 Hz to Nyquist, natural log of `max(mel, 1e-5)`.
//! 2. Cepstra: the orthonormal DCT-II of each frame over its `M` bands (scipy's
//!    `dct(type=2, norm="ortho")`, as in `librosa.feature.mfcc`):
//!    `c_k = s_k · Σ_{m<M} x_m · cos(π k (2m + 1) / 2M)`, `s_0 = √(1/M)`, `s_k = √(2/M)`.
//! 3. `c_0` (the frame's log energy) is dropped; `c_1..=c_K` are kept (`K` =
//!    `n_coefficients`, 13).
//! 4. Per frame, `MCD_t = (10 / ln 10) · √(2 · Σ_{k=1..=K} (c_ref,t,k − c_syn,t,k)²)` dB.
//! 5. MCD is the mean of `MCD_t` over the frames `t < min(T_ref, T_syn)`: frames are paired by
//!    index (a codec's output is time-aligned with its input, so there is no DTW), the longer
//!    signal's extra frames are ignored, and silent frames are kept.
//!
//! The natural log of the magnitude puts the cepstra in the log-amplitude units of the
//! classical definition. A constant gain only moves `c_0`, so it leaves MCD at 0 (as long as
//! no band falls under the log floor).

use burn::config::Config;
use voxspec_audio::{Audio, LogMel, MelConfig};

use crate::error::MetricsError;

/// `10 / ln 10 · √2`: the factor of the per-frame MCD in dB.
const MCD_SCALE: f64 = 10.0 / std::f64::consts::LN_10 * std::f64::consts::SQRT_2;

/// Settings of the MFCC-based mel-cepstral distortion (see the module documentation).
#[derive(Config, Debug)]
pub struct McdConfig {
    /// Cepstral coefficients compared, `c_1..=c_K` (`c_0` is always dropped).
    #[config(default = 13)]
    pub n_coefficients: usize,
    /// Mel bands of the log mel spectrogram the cepstra are taken from.
    #[config(default = 80)]
    pub n_mels: usize,
    /// Analysis window (milliseconds).
    #[config(default = 25.0)]
    pub window_ms: f64,
    /// Hop between frames (milliseconds).
    #[config(default = 10.0)]
    pub hop_ms: f64,
}

impl McdConfig {
    /// The log-mel front end at `sample_rate`: window and hop rounded to whole samples, FFT
    /// size the window's next power of two.
    ///
    /// # Errors
    /// [`MetricsError::InvalidConfig`] for a non-positive window or hop, or one shorter than a
    /// sample (window: two samples) at this rate.
    pub fn mel_config(&self, sample_rate: u32) -> Result<MelConfig, MetricsError> {
        let samples = |ms: f64| (ms * f64::from(sample_rate) / 1000.0).round();
        for (field, ms, min) in [
            ("window_ms", self.window_ms, 2.0),
            ("hop_ms", self.hop_ms, 1.0),
        ] {
            if !(ms.is_finite() && ms > 0.0 && samples(ms) >= min) {
                return Err(MetricsError::InvalidConfig {
                    field,
                    reason: format!(
                        "{ms} ms is {} samples at {sample_rate} Hz; at least {min} needed",
                        samples(ms)
                    ),
                });
            }
        }
        let win_length = samples(self.window_ms) as usize;
        Ok(MelConfig {
            sample_rate,
            n_fft: win_length.next_power_of_two(),
            hop_length: samples(self.hop_ms) as usize,
            win_length,
            n_mels: self.n_mels,
            fmin: 0.0,
            fmax: None,
            power: 1.0,
            center: true,
            log_floor: 1e-5,
        })
    }

    /// The metric for waveforms at `sample_rate`.
    ///
    /// # Errors
    /// [`MetricsError::InvalidConfig`] when `n_coefficients` is not in `1..n_mels` or the
    /// window or hop is out of range; [`MetricsError::Audio`] when the front end rejects the
    /// rate or band count.
    pub fn init(&self, sample_rate: u32) -> Result<MelCepstralDistortion, MetricsError> {
        if !(1..self.n_mels).contains(&self.n_coefficients) {
            return Err(MetricsError::InvalidConfig {
                field: "n_coefficients",
                reason: format!(
                    "must be in 1..{} (below n_mels, c_0 being dropped), got {}",
                    self.n_mels, self.n_coefficients
                ),
            });
        }
        let log_mel = LogMel::new(self.mel_config(sample_rate)?)?;
        Ok(MelCepstralDistortion {
            config: self.clone(),
            sample_rate,
            log_mel,
            dct: dct_rows(self.n_coefficients, self.n_mels),
        })
    }
}

/// Rows `1..=k` of the orthonormal DCT-II matrix of size `m`, `[k, m]` row-major.
fn dct_rows(k: usize, m: usize) -> Vec<f64> {
    let scale = (2.0 / m as f64).sqrt();
    (1..=k)
        .flat_map(|row| {
            (0..m).map(move |col| {
                let angle =
                    std::f64::consts::PI * row as f64 * (2 * col + 1) as f64 / (2 * m) as f64;
                scale * angle.cos()
            })
        })
        .collect()
}

/// The MCD of one pair of waveforms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McdScore {
    /// Mean per-frame MCD (dB).
    pub db: f64,
    /// Frames compared (the shorter signal's frame count).
    pub frames: usize,
}

/// The MFCC-based mel-cepstral distortion at one sample rate (see the module documentation).
#[derive(Debug, Clone)]
pub struct MelCepstralDistortion {
    config: McdConfig,
    sample_rate: u32,
    log_mel: LogMel,
    /// `[n_coefficients, n_mels]`: DCT-II rows 1..=K.
    dct: Vec<f64>,
}

impl MelCepstralDistortion {
    /// The settings.
    pub fn config(&self) -> &McdConfig {
        &self.config
    }

    /// Sample rate (Hz) the waveforms must have.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    /// Cepstra `c_1..=c_K` of every frame of `wave` (at [`MelCepstralDistortion::sample_rate`]).
    ///
    /// # Shapes
    /// `wave: [samples]` → `[frames, n_coefficients]` row-major.
    ///
    /// # Errors
    /// [`MetricsError::Empty`] for an empty waveform.
    pub fn cepstra(&self, wave: &[f32]) -> Result<Vec<f64>, MetricsError> {
        if wave.is_empty() {
            return Err(MetricsError::Empty { which: "input" });
        }
        let n_mels = self.config.n_mels;
        let log_mel = self.log_mel.compute(wave); // [frames, n_mels]
        Ok(log_mel
            .chunks_exact(n_mels)
            .flat_map(|frame| {
                self.dct.chunks_exact(n_mels).map(move |row| {
                    row.iter()
                        .zip(frame)
                        .map(|(w, &x)| w * f64::from(x))
                        .sum::<f64>()
                })
            })
            .collect())
    }

    /// MCD between a reference and its resynthesis, frames paired by index over the shorter
    /// one.
    ///
    /// # Errors
    /// [`MetricsError::RateMismatch`] when either waveform is not at
    /// [`MelCepstralDistortion::sample_rate`], [`MetricsError::Empty`] when either is empty.
    pub fn distortion(
        &self,
        reference: &Audio,
        synthesis: &Audio,
    ) -> Result<McdScore, MetricsError> {
        for (which, audio) in [("reference", reference), ("synthesis", synthesis)] {
            if audio.sample_rate != self.sample_rate {
                return Err(MetricsError::RateMismatch {
                    which,
                    expected: self.sample_rate,
                    found: audio.sample_rate,
                });
            }
            if audio.samples.is_empty() {
                return Err(MetricsError::Empty { which });
            }
        }
        let per_frame = self.frame_distortions(&reference.samples, &synthesis.samples)?;
        Ok(McdScore {
            db: per_frame.iter().sum::<f64>() / per_frame.len().max(1) as f64,
            frames: per_frame.len(),
        })
    }

    /// The MCD (dB) of every frame pair, frames paired by index over the shorter signal (both
    /// at [`MelCepstralDistortion::sample_rate`]; [`MelCepstralDistortion::distortion`] is their
    /// mean).
    ///
    /// # Shapes
    /// `reference: [n]`, `synthesis: [m]` → `[min(frames(n), frames(m))]`
    ///
    /// # Errors
    /// [`MetricsError::Empty`] when either is empty.
    pub fn frame_distortions(
        &self,
        reference: &[f32],
        synthesis: &[f32],
    ) -> Result<Vec<f64>, MetricsError> {
        let k = self.config.n_coefficients;
        let a = self.cepstra(reference)?;
        let b = self.cepstra(synthesis)?;
        Ok(a.chunks_exact(k)
            .zip(b.chunks_exact(k))
            .map(|(x, y)| {
                let sq: f64 = x.iter().zip(y).map(|(p, q)| (p - q) * (p - q)).sum();
                MCD_SCALE * sq.sqrt()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: u32 = 16000;

    /// One second of a voiced, syllable-modulated harmonic signal with a little noise.
    fn speech_like() -> Vec<f32> {
        let mut seed = 7u64;
        (0..RATE as usize)
            .map(|n| {
                let t = n as f32 / RATE as f32;
                let f0 = 120.0 + 30.0 * (std::f32::consts::TAU * 3.0 * t).sin();
                let voiced: f32 = (1..=12)
                    .map(|h| {
                        (std::f32::consts::TAU * f0 * h as f32 * t).sin() / h as f32
                            * (1.0 + 0.5 * (h as f32 * 0.7 + 5.0 * t).sin())
                    })
                    .sum();
                let envelope = 0.55 + 0.45 * (std::f32::consts::TAU * 4.0 * t).sin();
                0.2 * envelope * voiced + 0.01 * noise(&mut seed)
            })
            .collect()
    }

    /// Uniform noise in [-1, 1) from a 64-bit LCG.
    fn noise(seed: &mut u64) -> f32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 33) as f32 / (1u64 << 30) as f32) - 1.0
    }

    fn mcd() -> MelCepstralDistortion {
        McdConfig::new().init(RATE).unwrap()
    }

    #[test]
    fn mcd_of_a_signal_with_itself_is_zero() {
        let x = Audio::new(speech_like(), RATE);
        let score = mcd().distortion(&x, &x).unwrap();
        assert_eq!(score.db, 0.0);
        // Centred frames, hop 160: 1 + 16000 / 160.
        assert_eq!(score.frames, 101);
    }

    #[test]
    fn mcd_grows_with_the_noise_level() {
        let clean = speech_like();
        let m = mcd();
        let reference = Audio::new(clean.clone(), RATE);
        let mut seed = 99u64;
        let scores: Vec<f64> = [0.003, 0.03, 0.3]
            .iter()
            .map(|level| {
                let noisy = clean.iter().map(|x| x + level * noise(&mut seed)).collect();
                m.distortion(&reference, &Audio::new(noisy, RATE))
                    .unwrap()
                    .db
            })
            .collect();
        assert!(scores[0] > 0.0, "{scores:?}");
        assert!(scores.windows(2).all(|w| w[0] < w[1]), "{scores:?}");
        assert!(scores.iter().all(|s| s.is_finite()), "{scores:?}");
    }

    #[test]
    fn a_constant_gain_only_moves_c0() {
        let x = speech_like();
        let louder: Vec<f32> = x.iter().map(|v| 2.0 * v).collect();
        let score = mcd()
            .distortion(&Audio::new(x, RATE), &Audio::new(louder, RATE))
            .unwrap();
        assert!(score.db < 1e-3, "{}", score.db);
    }

    #[test]
    fn frames_are_paired_over_the_shorter_signal() {
        let x = speech_like();
        let half = Audio::new(x[..8000].to_vec(), RATE);
        let score = mcd().distortion(&Audio::new(x, RATE), &half).unwrap();
        assert_eq!(score.frames, 51);
        assert!(score.db.is_finite());
    }

    #[test]
    fn empty_and_mismatched_inputs_are_errors() {
        let m = mcd();
        let x = Audio::new(speech_like(), RATE);
        let empty = Audio::new(Vec::new(), RATE);
        let e = m.distortion(&x, &empty).unwrap_err();
        assert!(
            matches!(e, MetricsError::Empty { which: "synthesis" }),
            "{e}"
        );
        let e = m.distortion(&empty, &x).unwrap_err();
        assert!(
            matches!(e, MetricsError::Empty { which: "reference" }),
            "{e}"
        );
        let other = Audio::new(x.samples.clone(), 24000);
        let e = m.distortion(&x, &other).unwrap_err();
        assert!(e.to_string().contains("24000 Hz"), "{e}");
        assert!(m.cepstra(&[]).is_err());
    }

    #[test]
    fn bad_configs_are_refused() {
        for config in [
            McdConfig::new().with_n_coefficients(0),
            McdConfig::new().with_n_coefficients(80),
            McdConfig::new().with_hop_ms(0.0),
            McdConfig::new().with_window_ms(f64::NAN),
        ] {
            assert!(config.init(RATE).is_err(), "{config:?}");
        }
    }

    #[test]
    fn dct_rows_are_orthonormal() {
        let m = 80;
        let rows = dct_rows(13, m);
        for i in 0..13 {
            for j in 0..13 {
                let dot: f64 = (0..m).map(|c| rows[i * m + c] * rows[j * m + c]).sum();
                let expected = if i == j { 1.0 } else { 0.0 };
                assert!((dot - expected).abs() < 1e-9, "rows {i}, {j}: {dot}");
            }
            // Orthogonal to the constant row c_0.
            let sum: f64 = rows[i * m..(i + 1) * m].iter().sum();
            assert!(sum.abs() < 1e-9);
        }
    }
}
