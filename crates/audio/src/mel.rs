//! Mel filterbank and log-mel spectrogram, matching librosa.
//!
//! [`mel_filterbank`] reproduces `librosa.filters.mel(sr, n_fft, n_mels, fmin, fmax)` with its
//! defaults `htk=False, norm="slaney"`: band edges equally spaced on the Slaney mel scale (linear
//! below 1 kHz, logarithmic above), triangular filters, and Slaney area normalisation (each
//! triangle scaled by `2 / (f_upper - f_lower)`). It is computed in `f64` and rounded to `f32`,
//! as librosa does.
//!
//! [`LogMel`] computes `log(max(mel, log_floor))` of
//! `librosa.feature.melspectrogram(y, sr, n_fft, hop_length, win_length, window="hann",
//! center, pad_mode="constant", power, n_mels, fmin, fmax)`; the parity test reads a fixture
//! made by `tests/fixtures/make_mel_fixture.py`.

use serde::{Deserialize, Serialize};

use crate::error::AudioError;
use crate::stft::{Stft, StftConfig};

/// Log-mel front-end settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MelConfig {
    /// Sample rate in Hz the input is expected at.
    pub sample_rate: u32,
    /// FFT size.
    pub n_fft: usize,
    /// Hop between frames in samples.
    pub hop_length: usize,
    /// Hann window length (`<= n_fft`).
    pub win_length: usize,
    /// Number of mel bands.
    pub n_mels: usize,
    /// Lowest band edge in Hz.
    pub fmin: f32,
    /// Highest band edge in Hz; `None` means `sample_rate / 2`.
    pub fmax: Option<f32>,
    /// Exponent of the magnitude: 1 for magnitude, 2 for power.
    pub power: f32,
    /// Centre frames on `t * hop_length` (zero padding of `n_fft / 2` on both sides).
    pub center: bool,
    /// Floor applied before the natural log.
    pub log_floor: f32,
}

impl Default for MelConfig {
    /// 16 kHz, `n_fft` 1024, hop 256, window 1024, 80 bands over 0..8000 Hz, magnitude
    /// (power 1), centred, floor 1e-5.
    fn default() -> Self {
        Self {
            sample_rate: 16000,
            n_fft: 1024,
            hop_length: 256,
            win_length: 1024,
            n_mels: 80,
            fmin: 0.0,
            fmax: None,
            power: 1.0,
            center: true,
            log_floor: 1e-5,
        }
    }
}

impl MelConfig {
    /// The STFT part of the configuration.
    pub fn stft_config(&self) -> StftConfig {
        StftConfig {
            n_fft: self.n_fft,
            hop_length: self.hop_length,
            win_length: self.win_length,
            center: self.center,
        }
    }

    /// `fmax`, or `sample_rate / 2` when unset.
    pub fn fmax_hz(&self) -> f32 {
        self.fmax.unwrap_or(self.sample_rate as f32 / 2.0)
    }

    /// Check the fields.
    ///
    /// # Errors
    /// [`AudioError::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<(), AudioError> {
        self.stft_config().validate()?;
        if self.sample_rate == 0 {
            return Err(AudioError::invalid("sample_rate", "must be positive"));
        }
        if self.n_mels == 0 {
            return Err(AudioError::invalid("n_mels", "must be positive"));
        }
        let nyquist = self.sample_rate as f32 / 2.0;
        if !(self.fmin >= 0.0 && self.fmin < nyquist) {
            return Err(AudioError::invalid(
                "fmin",
                format!("must be in [0, {nyquist}), got {}", self.fmin),
            ));
        }
        let fmax = self.fmax_hz();
        if !(fmax > self.fmin && fmax <= nyquist) {
            return Err(AudioError::invalid(
                "fmax",
                format!("must be in ({}, {nyquist}], got {fmax}", self.fmin),
            ));
        }
        if !(self.power > 0.0 && self.power.is_finite()) {
            return Err(AudioError::invalid(
                "power",
                format!("must be > 0, got {}", self.power),
            ));
        }
        if !(self.log_floor > 0.0 && self.log_floor.is_finite()) {
            return Err(AudioError::invalid(
                "log_floor",
                format!("must be > 0, got {}", self.log_floor),
            ));
        }
        Ok(())
    }
}

/// Slaney mel scale (`librosa.hz_to_mel(htk=False)`): linear below 1 kHz, logarithmic above.
pub fn hz_to_mel(hz: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    if hz >= MIN_LOG_HZ {
        MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / (6.4f64.ln() / 27.0)
    } else {
        hz / F_SP
    }
}

/// Inverse of [`hz_to_mel`] (`librosa.mel_to_hz(htk=False)`).
pub fn mel_to_hz(mel: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    const MIN_LOG_HZ: f64 = 1000.0;
    const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * ((6.4f64.ln() / 27.0) * (mel - MIN_LOG_MEL)).exp()
    } else {
        F_SP * mel
    }
}

/// Mel filterbank `[n_mels, n_fft / 2 + 1]` row-major, as `librosa.filters.mel` with
/// `htk=False, norm="slaney"`.
///
/// Arguments are not validated (see [`MelConfig::validate`]); degenerate bands (zero width)
/// get all-zero rows instead of NaN.
pub fn mel_filterbank(
    sample_rate: u32,
    n_fft: usize,
    n_mels: usize,
    fmin: f32,
    fmax: f32,
) -> Vec<f32> {
    let n_bins = n_fft / 2 + 1;
    let sr = f64::from(sample_rate);
    // Band edges: n_mels + 2 points equally spaced in mel.
    let (mel_lo, mel_hi) = (hz_to_mel(f64::from(fmin)), hz_to_mel(f64::from(fmax)));
    let edges: Vec<f64> = (0..n_mels + 2)
        .map(|i| {
            let frac = i as f64 / (n_mels + 1) as f64;
            mel_to_hz(mel_lo + (mel_hi - mel_lo) * frac)
        })
        .collect();
    let mut weights = vec![0.0f32; n_mels * n_bins];
    for m in 0..n_mels {
        let (lo, mid, hi) = (edges[m], edges[m + 1], edges[m + 2]);
        let (d_lo, d_hi) = (mid - lo, hi - mid);
        if d_lo <= 0.0 || d_hi <= 0.0 {
            continue;
        }
        let enorm = 2.0 / (hi - lo);
        let row = &mut weights[m * n_bins..(m + 1) * n_bins];
        for (k, w) in row.iter_mut().enumerate() {
            let f = k as f64 * sr / n_fft as f64;
            let lower = (f - lo) / d_lo;
            let upper = (hi - f) / d_hi;
            *w = (lower.min(upper).max(0.0) * enorm) as f32;
        }
    }
    weights
}

/// A planned log-mel front-end: STFT plan and filterbank made once, applied to many signals.
#[derive(Debug, Clone)]
pub struct LogMel {
    cfg: MelConfig,
    stft: Stft,
    /// `[n_mels, n_bins]` row-major.
    filters: Vec<f32>,
    /// Per band, the range of bins with non-zero weight.
    support: Vec<std::ops::Range<usize>>,
}

impl LogMel {
    /// Validate `cfg`, plan the STFT and build the filterbank.
    ///
    /// # Errors
    /// [`AudioError::InvalidConfig`] from [`MelConfig::validate`].
    pub fn new(cfg: MelConfig) -> Result<Self, AudioError> {
        cfg.validate()?;
        let stft = Stft::new(cfg.stft_config())?;
        let filters = mel_filterbank(
            cfg.sample_rate,
            cfg.n_fft,
            cfg.n_mels,
            cfg.fmin,
            cfg.fmax_hz(),
        );
        let n_bins = cfg.stft_config().n_bins();
        let support = filters
            .chunks_exact(n_bins)
            .map(|row| {
                let first = row.iter().position(|&w| w != 0.0).unwrap_or(0);
                let last = row.iter().rposition(|&w| w != 0.0).map_or(0, |i| i + 1);
                first..last.max(first)
            })
            .collect();
        Ok(Self {
            cfg,
            stft,
            filters,
            support,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MelConfig {
        &self.cfg
    }

    /// Number of mel bands.
    pub fn n_mels(&self) -> usize {
        self.cfg.n_mels
    }

    /// Number of frames [`LogMel::compute`] returns for `n_samples` samples.
    pub fn n_frames(&self, n_samples: usize) -> usize {
        self.stft.n_frames(n_samples)
    }

    /// The filterbank, `[n_mels, n_fft / 2 + 1]` row-major.
    pub fn filterbank(&self) -> &[f32] {
        &self.filters
    }

    /// Mel spectrogram before the log: `filters · |STFT|^power`.
    ///
    /// # Shapes
    /// `x: [n_samples]` → `[n_frames, n_mels]` row-major.
    pub fn mel(&self, x: &[f32]) -> Vec<f32> {
        let n_bins = self.stft.config().n_bins();
        let n_mels = self.cfg.n_mels;
        let power = self.cfg.power;
        let mut mag = vec![0.0f32; n_bins];
        let mut out = vec![0.0f32; self.stft.n_frames(x.len()) * n_mels];
        self.stft.for_each_frame(x, |t, bins| {
            for (m, c) in mag.iter_mut().zip(bins) {
                *m = if power == 1.0 {
                    c.norm()
                } else if power == 2.0 {
                    c.norm_sqr()
                } else {
                    c.norm().powf(power)
                };
            }
            let row = &mut out[t * n_mels..(t + 1) * n_mels];
            for (b, (o, range)) in row.iter_mut().zip(&self.support).enumerate() {
                let w = &self.filters[b * n_bins..(b + 1) * n_bins];
                *o = w[range.clone()]
                    .iter()
                    .zip(&mag[range.clone()])
                    .map(|(a, b)| a * b)
                    .sum();
            }
        });
        out
    }

    /// Natural log of `max(mel, log_floor)`.
    ///
    /// # Shapes
    /// `x: [n_samples]` → `[n_frames, n_mels]` row-major, `n_frames` from
    /// [`LogMel::n_frames`].
    pub fn compute(&self, x: &[f32]) -> Vec<f32> {
        let floor = self.cfg.log_floor;
        let mut mel = self.mel(x);
        for v in &mut mel {
            *v = v.max(floor).ln();
        }
        mel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::sine;

    #[test]
    fn mel_scale_round_trips_and_is_continuous() {
        for &hz in &[0.0, 100.0, 999.0, 1000.0, 1001.0, 4000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9, "{hz}");
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
        assert!((hz_to_mel(999.999_999) - 15.0).abs() < 1e-6);
    }

    #[test]
    fn filterbank_shape_and_slaney_area() {
        let fb = mel_filterbank(16000, 1024, 80, 0.0, 8000.0);
        assert_eq!(fb.len(), 80 * 513);
        assert!(fb.iter().all(|&w| w >= 0.0));
        // Slaney normalisation: each triangle has area 1 in Hz, i.e. sum(w) * bin_hz ≈ 1
        // for bands wide enough to be sampled well.
        let bin_hz = 16000.0 / 1024.0;
        for m in 40..80 {
            let area: f32 = fb[m * 513..(m + 1) * 513].iter().sum::<f32>() * bin_hz;
            assert!((area - 1.0).abs() < 0.02, "band {m}: area {area}");
        }
    }

    #[test]
    fn config_default_serde_and_validation() {
        let c = MelConfig::default();
        assert_eq!(c.fmax_hz(), 8000.0);
        let json = serde_json::to_string(&c).unwrap();
        let back: MelConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let partial: MelConfig = serde_json::from_str(r#"{"n_mels": 100}"#).unwrap();
        assert_eq!(partial, MelConfig { n_mels: 100, ..c });
        for (bad, field) in [
            (MelConfig { n_mels: 0, ..c }, "n_mels"),
            (
                MelConfig {
                    fmax: Some(9000.0),
                    ..c
                },
                "fmax",
            ),
            (MelConfig { fmin: 8000.0, ..c }, "fmin"),
            (
                MelConfig {
                    log_floor: 0.0,
                    ..c
                },
                "log_floor",
            ),
            (MelConfig { power: 0.0, ..c }, "power"),
            (
                MelConfig {
                    sample_rate: 0,
                    ..c
                },
                "sample_rate",
            ),
            (MelConfig { hop_length: 0, ..c }, "hop_length"),
        ] {
            match LogMel::new(bad) {
                Err(AudioError::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn log_mel_shape_floor_and_peak_band() {
        let lm = LogMel::new(MelConfig::default()).unwrap();
        assert_eq!(lm.n_mels(), 80);
        let x = sine(1000.0, 16000, 16000, 0.5);
        let out = lm.compute(&x);
        assert_eq!(lm.n_frames(x.len()), 1 + 16000 / 256);
        assert_eq!(out.len(), lm.n_frames(x.len()) * 80);
        // Middle frame: the loudest band is the one whose filter peaks nearest 1 kHz.
        let t = 30;
        let row = &out[t * 80..(t + 1) * 80];
        let best = (0..80).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
        let fb = lm.filterbank();
        let bin = (1000.0f32 / (16000.0 / 1024.0)).round() as usize;
        let want = (0..80)
            .max_by(|&a, &b| fb[a * 513 + bin].total_cmp(&fb[b * 513 + bin]))
            .unwrap();
        assert_eq!(best, want);
        // Silence sits exactly at the floor.
        let silent = lm.compute(&vec![0.0; 1000]);
        assert!(silent.iter().all(|&v| v == 1e-5f32.ln()));
        assert!(lm.compute(&[]).is_empty());
    }

    #[test]
    fn mel_equals_dense_filterbank_product() {
        let x: Vec<f32> = sine(440.0, 16000, 4000, 0.3)
            .iter()
            .zip(sine(3000.0, 16000, 4000, 0.1))
            .map(|(a, b)| a + b)
            .collect();
        for power in [1.0f32, 2.0, 1.5] {
            let cfg = MelConfig {
                power,
                ..MelConfig::default()
            };
            let lm = LogMel::new(cfg).unwrap();
            let spec = Stft::new(cfg.stft_config()).unwrap().forward(&x);
            let mel = lm.mel(&x);
            let fb = mel_filterbank(16000, 1024, 80, 0.0, 8000.0);
            for t in 0..spec.n_frames {
                for m in 0..80 {
                    let want: f64 = (0..513)
                        .map(|k| {
                            f64::from(fb[m * 513 + k])
                                * f64::from(spec.frame(t)[k].norm()).powf(f64::from(power))
                        })
                        .sum();
                    let got = f64::from(mel[t * 80 + m]);
                    assert!(
                        (got - want).abs() <= 1e-5 * want.abs() + 1e-9,
                        "p {power} t {t} m {m}: {got} vs {want}"
                    );
                }
            }
        }
    }

    /// Reads a float32 tensor from the librosa fixture.
    fn fixture_tensor(st: &safetensors::SafeTensors<'_>, name: &str) -> (Vec<usize>, Vec<f32>) {
        let view = st.tensor(name).unwrap();
        assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
        let data = view
            .data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        (view.shape().to_vec(), data)
    }

    /// Parity with librosa 0.11 (fixture made by tests/fixtures/make_mel_fixture.py).
    #[test]
    fn librosa_parity() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/mel_fixture.safetensors"
        );
        let bytes = std::fs::read(path).unwrap();
        let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
        let librosa = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get("librosa").cloned());
        assert!(
            librosa.is_some(),
            "fixture metadata lacks the librosa version"
        );
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let (_, signal) = fixture_tensor(&st, "signal");
        let (fb_shape, fb_ref) = fixture_tensor(&st, "filterbank");
        let (lm_shape, lm_ref) = fixture_tensor(&st, "log_mel");
        assert_eq!(fb_shape, vec![80, 513]);

        let fb = mel_filterbank(16000, 1024, 80, 0.0, 8000.0);
        let fb_err = fb
            .iter()
            .zip(&fb_ref)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let fb_max = fb_ref.iter().copied().fold(0.0f32, f32::max);

        let lm = LogMel::new(MelConfig::default()).unwrap();
        let out = lm.compute(&signal);
        assert_eq!(lm_shape, vec![lm.n_frames(signal.len()), 80]);
        assert_eq!(out.len(), lm_ref.len());
        let lm_err = out
            .iter()
            .zip(&lm_ref)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        let lm_mean = out
            .iter()
            .zip(&lm_ref)
            .map(|(a, b)| (a - b).abs())
            .sum::<f32>()
            / out.len() as f32;
        eprintln!(
            "librosa {}: filterbank max abs err {fb_err:.3e} (max weight {fb_max:.3e}); \
             log-mel max abs err {lm_err:.3e}, mean {lm_mean:.3e}",
            librosa.unwrap_or_default()
        );
        // Measured 1.9e-9 and 5.7e-6 (librosa 0.11.0, numpy 2.4.6).
        assert!(fb_err < 1e-8, "filterbank max abs err {fb_err}");
        assert!(lm_err < 5e-5, "log-mel max abs err {lm_err}");
    }
}
