//! Frame-wise fundamental frequency (F0) with a voicing decision: YIN (de Cheveigné & Kawahara
//! 2002, "YIN, a fundamental frequency estimator for speech and music", JASA 111(4), §II).
//!
//! ```text
//! per frame (integration window W samples, lags τ = τ_min..=τ_max):
//!   step 2  d(τ)  = Σ_{j<W} (x_j − x_{j+τ})²                       difference function
//!   step 3  d'(τ) = d(τ) · τ / Σ_{k=1..τ} d(k),  d'(0) = 1          cumulative mean normalised
//!   step 4  τ* = first τ with d'(τ) < threshold, walked down to its local minimum;
//!           none below the threshold → unvoiced
//!   step 5  parabolic interpolation of d' around τ*
//!   F0 = sample_rate / τ*     (kept when fmin ≤ F0 ≤ fmax)
//! ```
//!
//! `d'(τ*)` is the frame's aperiodicity: near 0 for a periodic signal, near 1 for noise, so the
//! threshold doubles as the voicing decision. Frames are hop-spaced from sample 0; a frame needs
//! `W + τ_max` samples, and the signal is zero-padded at the end for the last frames.

use crate::error::AudioError;

/// YIN settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PitchConfig {
    /// Lowest F0 searched (Hz); sets the longest lag.
    pub fmin: f32,
    /// Highest F0 searched (Hz); sets the shortest lag.
    pub fmax: f32,
    /// Integration window W (seconds); at least one period of `fmin` is advised.
    pub frame: f32,
    /// Hop between frames (seconds).
    pub hop: f32,
    /// Aperiodicity threshold on `d'` (the paper's absolute threshold, 0.1): lower is stricter
    /// voicing.
    pub threshold: f32,
}

impl Default for PitchConfig {
    /// Speech: 50–500 Hz, 25 ms window, 10 ms hop, threshold 0.15.
    fn default() -> Self {
        Self {
            fmin: 50.0,
            fmax: 500.0,
            frame: 0.025,
            hop: 0.01,
            threshold: 0.15,
        }
    }
}

/// Window, hop and lag range in samples.
#[derive(Debug, Clone, Copy)]
struct Lags {
    window: usize,
    hop: usize,
    tau_min: usize,
    tau_max: usize,
}

impl PitchConfig {
    /// Checks the fields for `sample_rate`.
    ///
    /// # Errors
    /// [`AudioError::InvalidConfig`] naming the first bad field.
    pub fn validate(&self, sample_rate: u32) -> Result<(), AudioError> {
        self.lags(sample_rate).map(|_| ())
    }

    fn lags(&self, sample_rate: u32) -> Result<Lags, AudioError> {
        let bad = |field, detail: String| Err(AudioError::InvalidConfig { field, detail });
        let sr = sample_rate as f32;
        if sample_rate == 0 {
            return bad("sample_rate", "must be positive".into());
        }
        if !(self.fmin.is_finite() && self.fmin > 0.0) {
            return bad("fmin", format!("must be positive, got {}", self.fmin));
        }
        if !(self.fmax.is_finite() && self.fmax > self.fmin && self.fmax < sr / 2.0) {
            return bad(
                "fmax",
                format!(
                    "must lie in (fmin, sample_rate / 2) = ({}, {}), got {}",
                    self.fmin,
                    sr / 2.0,
                    self.fmax
                ),
            );
        }
        if !(self.threshold.is_finite() && self.threshold > 0.0 && self.threshold < 1.0) {
            return bad(
                "threshold",
                format!("must lie in (0, 1), got {}", self.threshold),
            );
        }
        let window = (self.frame * sr).round();
        let hop = (self.hop * sr).round();
        if !(window.is_finite() && window >= 2.0) {
            return bad(
                "frame",
                format!("must span at least 2 samples, got {} s", self.frame),
            );
        }
        if !(hop.is_finite() && hop >= 1.0) {
            return bad(
                "hop",
                format!("must span at least 1 sample, got {} s", self.hop),
            );
        }
        let tau_min = ((sr / self.fmax).floor() as usize).max(2);
        let tau_max = (sr / self.fmin).ceil() as usize;
        Ok(Lags {
            window: window as usize,
            hop: hop as usize,
            tau_min,
            tau_max: tau_max.max(tau_min + 1),
        })
    }
}

/// F0 (Hz) of frame `frame` (W + τ_max + 1 samples), or `None` when it is unvoiced.
fn yin_frame(frame: &[f32], lags: Lags, threshold: f32, sample_rate: f32) -> Option<f32> {
    let Lags {
        window,
        tau_min,
        tau_max,
        ..
    } = lags;
    // d(τ) for τ = 0..=τ_max+1 (one past τ_max for the parabola).
    let last = tau_max + 1;
    let mut d = vec![0.0f64; last + 1];
    for (tau, dt) in d.iter_mut().enumerate().skip(1) {
        *dt = (0..window)
            .map(|j| {
                let e = f64::from(frame[j]) - f64::from(frame[j + tau]);
                e * e
            })
            .sum();
    }
    // d'(τ), d'(0) = 1; a silent frame (all d = 0) stays at 1: aperiodic.
    let mut cmnd = vec![1.0f64; last + 1];
    let mut running = 0.0f64;
    for tau in 1..=last {
        running += d[tau];
        if running > 0.0 {
            cmnd[tau] = d[tau] * tau as f64 / running;
        }
    }
    let threshold = f64::from(threshold);
    let mut tau = (tau_min..=tau_max).find(|&t| cmnd[t] < threshold)?;
    while tau < tau_max && cmnd[tau + 1] < cmnd[tau] {
        tau += 1;
    }
    // Parabolic interpolation of the minimum (step 5).
    let (a, b, c) = (cmnd[tau - 1], cmnd[tau], cmnd[tau + 1]);
    let denom = a - 2.0 * b + c;
    let shift = if denom.abs() > 1e-12 {
        (0.5 * (a - c) / denom).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let period = tau as f64 + shift;
    Some((f64::from(sample_rate) / period) as f32)
}

/// YIN F0 track of `samples` at `sample_rate`: one value per hop-spaced frame, `None` where the
/// frame is unvoiced (no lag under the threshold, silence) or the estimate is outside
/// `[fmin, fmax]`.
///
/// # Shapes
/// `samples: [n]` → `[ceil(n / hop)]` (empty for empty input)
///
/// # Errors
/// [`AudioError::InvalidConfig`] for a bad `cfg` (see [`PitchConfig::validate`]).
pub fn pitch_track(
    samples: &[f32],
    sample_rate: u32,
    cfg: &PitchConfig,
) -> Result<Vec<Option<f32>>, AudioError> {
    let lags = cfg.lags(sample_rate)?;
    let need = lags.window + lags.tau_max + 2;
    let n_frames = samples.len().div_ceil(lags.hop);
    let mut buf = vec![0.0f32; need];
    let track = (0..n_frames)
        .map(|i| {
            let start = i * lags.hop;
            let avail = samples.len().saturating_sub(start).min(need);
            buf[..avail].copy_from_slice(&samples[start..start + avail]);
            buf[avail..].fill(0.0);
            yin_frame(&buf, lags, cfg.threshold, sample_rate as f32)
                .filter(|f| (cfg.fmin..=cfg.fmax).contains(f))
        })
        .collect();
    Ok(track)
}

/// Median of the voiced frames of a track (`None` when no frame is voiced).
pub fn median_f0(track: &[Option<f32>]) -> Option<f32> {
    let mut voiced: Vec<f32> = track.iter().flatten().copied().collect();
    if voiced.is_empty() {
        return None;
    }
    voiced.sort_by(f32::total_cmp);
    let n = voiced.len();
    Some(if n % 2 == 1 {
        voiced[n / 2]
    } else {
        0.5 * (voiced[n / 2 - 1] + voiced[n / 2])
    })
}

/// Fraction of voiced frames (0 for an empty track).
pub fn voiced_fraction(track: &[Option<f32>]) -> f32 {
    if track.is_empty() {
        return 0.0;
    }
    track.iter().filter(|f| f.is_some()).count() as f32 / track.len() as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::sine;

    const SR: u32 = 16000;

    /// A band-limited sawtooth-like tone: harmonics k·f0 below 4 kHz with amplitude 1/k.
    fn harmonic(f0: f32, n: usize) -> Vec<f32> {
        let mut out = vec![0.0f32; n];
        let mut k = 1;
        while k as f32 * f0 < 4000.0 {
            for (o, s) in out
                .iter_mut()
                .zip(sine(k as f32 * f0, SR, n, 0.3 / k as f32))
            {
                *o += s;
            }
            k += 1;
        }
        out
    }

    fn median_of(x: &[f32]) -> Option<f32> {
        median_f0(&pitch_track(x, SR, &PitchConfig::default()).unwrap())
    }

    fn assert_near(got: Option<f32>, want: f32) {
        let got = got.unwrap_or_else(|| panic!("no F0 where {want} Hz was expected"));
        assert!(
            (got - want).abs() / want < 0.02,
            "F0 {got} Hz, expected {want} Hz ± 2 %"
        );
    }

    #[test]
    fn sines_read_their_frequency_and_are_voiced() {
        for f in [110.0, 220.0, 347.0] {
            let x = sine(f, SR, SR as usize, 0.5);
            let track = pitch_track(&x, SR, &PitchConfig::default()).unwrap();
            assert_near(median_f0(&track), f);
            assert!(voiced_fraction(&track) > 0.9, "{f} Hz");
        }
    }

    #[test]
    fn harmonic_tones_read_their_fundamental_not_a_harmonic() {
        for f in [110.0, 220.0] {
            assert_near(median_of(&harmonic(f, SR as usize)), f);
        }
    }

    #[test]
    fn silence_and_white_noise_are_unvoiced() {
        let silence = vec![0.0f32; SR as usize];
        let track = pitch_track(&silence, SR, &PitchConfig::default()).unwrap();
        assert_eq!(median_f0(&track), None);
        assert_eq!(voiced_fraction(&track), 0.0);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<f32> = (0..SR as usize)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let track = pitch_track(&noise, SR, &PitchConfig::default()).unwrap();
        assert!(
            voiced_fraction(&track) < 0.05,
            "noise voiced in {} of frames",
            voiced_fraction(&track)
        );
    }

    #[test]
    fn a_tone_pitched_up_350_cents_reads_1_224_times_higher() {
        let base = 120.0f32;
        let up = base * 2f32.powf(350.0 / 1200.0);
        let ratio = median_of(&harmonic(up, SR as usize)).unwrap()
            / median_of(&harmonic(base, SR as usize)).unwrap();
        assert!((ratio - 1.224).abs() < 0.01, "ratio {ratio}");
    }

    #[test]
    fn track_has_one_value_per_hop_and_bad_settings_are_errors() {
        let x = sine(200.0, SR, 1000, 0.5);
        assert_eq!(
            pitch_track(&x, SR, &PitchConfig::default()).unwrap().len(),
            1000usize.div_ceil(160)
        );
        assert!(
            pitch_track(&[], SR, &PitchConfig::default())
                .unwrap()
                .is_empty()
        );
        for cfg in [
            PitchConfig {
                fmin: 0.0,
                ..PitchConfig::default()
            },
            PitchConfig {
                fmax: 40.0,
                ..PitchConfig::default()
            },
            PitchConfig {
                fmax: 9000.0,
                ..PitchConfig::default()
            },
            PitchConfig {
                threshold: 1.5,
                ..PitchConfig::default()
            },
            PitchConfig {
                hop: 0.0,
                ..PitchConfig::default()
            },
        ] {
            let e = pitch_track(&x, SR, &cfg).unwrap_err();
            assert!(matches!(e, AudioError::InvalidConfig { .. }), "{e}");
        }
    }
}
