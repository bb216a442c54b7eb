//! Short-time Fourier transform and its inverse, matching `librosa.stft` / `librosa.istft`.
//!
//! Conventions (librosa >= 0.10 defaults): a periodic Hann window of `win_length` samples,
//! zero-padded to `n_fft` and centred; with `center = true` the signal is padded with
//! `n_fft / 2` zeros on both sides (`pad_mode = "constant"`), so frame `t` is centred on sample
//! `t * hop_length`. The inverse is weighted overlap-add divided by the summed squared window
//! (`librosa.istft`), which reconstructs the input exactly wherever the window sum is non-zero.
//!
//! FFT plans are made once in [`Stft::new`]; [`Stft::forward`] and [`Stft::inverse`] take
//! `&self`, so one `Stft` can be shared across threads.

use std::sync::Arc;

use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::error::AudioError;

/// Frames transformed per batched FFT call (bounds the scratch memory).
const FRAMES_PER_BATCH: usize = 64;

/// STFT framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StftConfig {
    /// FFT size; the spectrum has `n_fft / 2 + 1` bins.
    pub n_fft: usize,
    /// Hop between frames in samples.
    pub hop_length: usize,
    /// Hann window length, `<= n_fft` (zero-padded to `n_fft`, centred).
    pub win_length: usize,
    /// Pad `n_fft / 2` zeros on both sides so frames are centred on `t * hop_length`.
    pub center: bool,
}

impl Default for StftConfig {
    /// `n_fft` 1024, hop 256, window 1024, centred.
    fn default() -> Self {
        Self {
            n_fft: 1024,
            hop_length: 256,
            win_length: 1024,
            center: true,
        }
    }
}

impl StftConfig {
    /// Check the fields.
    ///
    /// # Errors
    /// [`AudioError::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<(), AudioError> {
        if self.n_fft < 2 {
            return Err(AudioError::invalid(
                "n_fft",
                format!("must be >= 2, got {}", self.n_fft),
            ));
        }
        if self.hop_length == 0 {
            return Err(AudioError::invalid("hop_length", "must be positive"));
        }
        if self.win_length == 0 || self.win_length > self.n_fft {
            return Err(AudioError::invalid(
                "win_length",
                format!(
                    "must be in 1..={} (n_fft), got {}",
                    self.n_fft, self.win_length
                ),
            ));
        }
        Ok(())
    }

    /// Number of bins, `n_fft / 2 + 1`.
    pub fn n_bins(&self) -> usize {
        self.n_fft / 2 + 1
    }

    /// Number of frames for `n_samples` input samples: `1 + n / hop` when centred (even
    /// `n_fft`), `1 + (n - n_fft) / hop` otherwise, and 0 for empty (or, uncentred, too short)
    /// input.
    pub fn n_frames(&self, n_samples: usize) -> usize {
        if n_samples == 0 || self.hop_length == 0 {
            return 0;
        }
        let padded = n_samples + 2 * self.pad();
        if padded < self.n_fft {
            0
        } else {
            1 + (padded - self.n_fft) / self.hop_length
        }
    }

    /// Zeros padded on each side.
    fn pad(&self) -> usize {
        if self.center { self.n_fft / 2 } else { 0 }
    }
}

/// A complex spectrogram, `[n_frames, n_bins]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Spectrogram {
    /// Number of frames (rows).
    pub n_frames: usize,
    /// Number of frequency bins (columns), `n_fft / 2 + 1`.
    pub n_bins: usize,
    /// `data[t * n_bins + k]` is bin `k` of frame `t`.
    pub data: Vec<Complex<f32>>,
}

impl Spectrogram {
    /// `|X|`, same layout.
    pub fn magnitude(&self) -> Vec<f32> {
        self.data.iter().map(|c| c.norm()).collect()
    }

    /// `|X|^2`, same layout.
    pub fn power(&self) -> Vec<f32> {
        self.data.iter().map(|c| c.norm_sqr()).collect()
    }

    /// The bins of frame `t`.
    ///
    /// # Panics
    /// If `t >= n_frames`.
    pub fn frame(&self, t: usize) -> &[Complex<f32>] {
        &self.data[t * self.n_bins..(t + 1) * self.n_bins]
    }
}

/// Periodic Hann window of `win_length` samples, zero-padded and centred in `n_fft`
/// (`librosa.filters.get_window("hann", win_length, fftbins=True)` then `pad_center`).
pub fn hann_window(win_length: usize, n_fft: usize) -> Vec<f32> {
    let mut w = vec![0.0f32; n_fft.max(win_length)];
    let offset = (w.len() - win_length) / 2;
    let n = win_length as f64;
    for i in 0..win_length {
        let v = 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n).cos();
        w[offset + i] = v as f32;
    }
    w
}

/// A planned STFT: forward and inverse transforms for one [`StftConfig`].
#[derive(Clone)]
pub struct Stft {
    cfg: StftConfig,
    /// Hann window zero-padded to `n_fft`.
    window: Vec<f32>,
    /// Range of `window` that is non-zero (the Hann window proper).
    support: std::ops::Range<usize>,
    fft: Arc<dyn Fft<f32>>,
    ifft: Arc<dyn Fft<f32>>,
}

impl std::fmt::Debug for Stft {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stft")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl Stft {
    /// Validate `cfg` and plan the FFTs.
    ///
    /// # Errors
    /// [`AudioError::InvalidConfig`] from [`StftConfig::validate`].
    pub fn new(cfg: StftConfig) -> Result<Self, AudioError> {
        cfg.validate()?;
        let mut planner = FftPlanner::<f32>::new();
        let fft = planner.plan_fft_forward(cfg.n_fft);
        let ifft = planner.plan_fft_inverse(cfg.n_fft);
        let window = hann_window(cfg.win_length, cfg.n_fft);
        let offset = (cfg.n_fft - cfg.win_length) / 2;
        Ok(Self {
            cfg,
            window,
            support: offset..offset + cfg.win_length,
            fft,
            ifft,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &StftConfig {
        &self.cfg
    }

    /// The analysis window (length `n_fft`).
    pub fn window(&self) -> &[f32] {
        &self.window
    }

    /// Number of frames [`Stft::forward`] returns for `n_samples` samples.
    pub fn n_frames(&self, n_samples: usize) -> usize {
        self.cfg.n_frames(n_samples)
    }

    /// Complex STFT of `x`.
    ///
    /// # Shapes
    /// `x: [n_samples]` → `[n_frames, n_fft / 2 + 1]` with `n_frames` from
    /// [`StftConfig::n_frames`].
    pub fn forward(&self, x: &[f32]) -> Spectrogram {
        let n_bins = self.cfg.n_bins();
        let n_frames = self.n_frames(x.len());
        let mut data = vec![Complex::new(0.0, 0.0); n_frames * n_bins];
        self.for_each_frame(x, |t, bins| {
            data[t * n_bins..(t + 1) * n_bins].copy_from_slice(bins);
        });
        Spectrogram {
            n_frames,
            n_bins,
            data,
        }
    }

    /// Computes the STFT of `x` frame by frame without materialising the whole spectrogram:
    /// `f(t, bins)` receives frame `t`'s `n_fft / 2 + 1` complex bins, in order. Memory stays
    /// bounded by one batch of frames, which keeps many threads from contending on large
    /// allocations.
    pub fn for_each_frame(&self, x: &[f32], mut f: impl FnMut(usize, &[Complex<f32>])) {
        let n_fft = self.cfg.n_fft;
        let n_bins = self.cfg.n_bins();
        let n_frames = self.n_frames(x.len());
        let mut buf = vec![Complex::new(0.0f32, 0.0); FRAMES_PER_BATCH.min(n_frames) * n_fft];
        let mut scratch = vec![Complex::new(0.0f32, 0.0); self.fft.get_inplace_scratch_len()];
        let pad = self.cfg.pad() as isize;
        for batch_start in (0..n_frames).step_by(FRAMES_PER_BATCH) {
            let batch = FRAMES_PER_BATCH.min(n_frames - batch_start);
            let frames = &mut buf[..batch * n_fft];
            for (b, frame) in frames.chunks_exact_mut(n_fft).enumerate() {
                // frame[i] = x[start + i] * window[i]; x is zero outside its range.
                let start = ((batch_start + b) * self.cfg.hop_length) as isize - pad;
                frame.fill(Complex::new(0.0, 0.0));
                for i in self.support.clone() {
                    let j = start + i as isize;
                    if j >= 0 && (j as usize) < x.len() {
                        frame[i].re = x[j as usize] * self.window[i];
                    }
                }
            }
            self.fft.process_with_scratch(frames, &mut scratch);
            for (b, frame) in frames.chunks_exact(n_fft).enumerate() {
                f(batch_start + b, &frame[..n_bins]);
            }
        }
    }

    /// Inverse STFT (weighted overlap-add, `librosa.istft`).
    ///
    /// With `length = None` the output has `hop * (n_frames - 1)` samples when centred (the
    /// length of any input with that many frames, rounded down to a multiple of the hop), or
    /// `n_fft + hop * (n_frames - 1)` uncentred; `Some(n)` trims or zero-pads to exactly `n`.
    /// The imaginary parts of the DC and Nyquist bins are ignored. A spectrogram whose bin count
    /// does not match the plan yields an empty vector (logged as an error).
    ///
    /// # Shapes
    /// `[n_frames, n_fft / 2 + 1]` → `[length]`.
    pub fn inverse(&self, spec: &Spectrogram, length: Option<usize>) -> Vec<f32> {
        let n_fft = self.cfg.n_fft;
        let hop = self.cfg.hop_length;
        let n_bins = self.cfg.n_bins();
        if spec.n_bins != n_bins || spec.data.len() != spec.n_frames * spec.n_bins {
            tracing::error!(
                got_bins = spec.n_bins,
                want_bins = n_bins,
                data = spec.data.len(),
                "spectrogram shape does not match the STFT plan"
            );
            return Vec::new();
        }
        let pad = self.cfg.pad();
        let n_frames = spec.n_frames;
        let full_len = if n_frames == 0 {
            0
        } else {
            n_fft + hop * (n_frames - 1)
        };
        let out_len = length.unwrap_or_else(|| full_len.saturating_sub(2 * pad));
        let mut y = vec![0.0f32; full_len];
        let mut wsum = vec![0.0f32; full_len];
        let mut buf = vec![Complex::new(0.0f32, 0.0); FRAMES_PER_BATCH.min(n_frames) * n_fft];
        let mut scratch = vec![Complex::new(0.0f32, 0.0); self.ifft.get_inplace_scratch_len()];
        let scale = 1.0 / n_fft as f32;
        for batch_start in (0..n_frames).step_by(FRAMES_PER_BATCH) {
            let batch = FRAMES_PER_BATCH.min(n_frames - batch_start);
            let frames = &mut buf[..batch * n_fft];
            for (b, frame) in frames.chunks_exact_mut(n_fft).enumerate() {
                // Hermitian extension of the half spectrum (numpy.fft.irfft semantics).
                let half = spec.frame(batch_start + b);
                frame[..n_bins].copy_from_slice(half);
                frame[0].im = 0.0;
                if n_fft.is_multiple_of(2) {
                    frame[n_fft / 2].im = 0.0;
                }
                for k in n_bins..n_fft {
                    frame[k] = half[n_fft - k].conj();
                }
            }
            self.ifft.process_with_scratch(frames, &mut scratch);
            for (b, frame) in frames.chunks_exact(n_fft).enumerate() {
                let start = (batch_start + b) * hop;
                for i in self.support.clone() {
                    let w = self.window[i];
                    y[start + i] += frame[i].re * scale * w;
                    wsum[start + i] += w * w;
                }
            }
        }
        for (v, &w) in y.iter_mut().zip(&wsum) {
            if w > f32::MIN_POSITIVE {
                *v /= w;
            }
        }
        let mut out: Vec<f32> = y
            .get(pad..)
            .unwrap_or_default()
            .iter()
            .take(out_len)
            .copied()
            .collect();
        out.resize(out_len, 0.0);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random samples in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn inverse_of_forward_is_identity() {
        for &n_fft in &[512usize, 1024] {
            let cfg = StftConfig {
                n_fft,
                hop_length: n_fft / 4,
                win_length: n_fft,
                center: true,
            };
            let stft = Stft::new(cfg).unwrap();
            for &n in &[n_fft / 4 * 37, 12345] {
                let x = noise(n, n as u64);
                let spec = stft.forward(&x);
                assert_eq!(spec.n_frames, 1 + n / (n_fft / 4));
                let y = stft.inverse(&spec, Some(n));
                assert_eq!(y.len(), n);
                let err = x
                    .iter()
                    .zip(&y)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(err < 1e-5, "n_fft {n_fft} n {n}: max err {err}");
            }
        }
    }

    #[test]
    fn inverse_default_length_and_short_window() {
        let cfg = StftConfig {
            n_fft: 256,
            hop_length: 64,
            win_length: 200,
            center: true,
        };
        let stft = Stft::new(cfg).unwrap();
        let x = noise(64 * 20, 7);
        let spec = stft.forward(&x);
        let y = stft.inverse(&spec, None);
        assert_eq!(y.len(), x.len());
        let err = x
            .iter()
            .zip(&y)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(err < 1e-5, "max err {err}");
        // Longer requested length is zero-padded.
        let y = stft.inverse(&spec, Some(x.len() + 1000));
        assert!(y[x.len() + 200..].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn forward_matches_naive_dft() {
        let (n_fft, hop) = (64usize, 16usize);
        for &center in &[true, false] {
            let cfg = StftConfig {
                n_fft,
                hop_length: hop,
                win_length: 48,
                center,
            };
            let stft = Stft::new(cfg).unwrap();
            let x = noise(300, 3);
            let spec = stft.forward(&x);
            assert_eq!(spec.n_frames, cfg.n_frames(x.len()));
            let w = hann_window(48, n_fft);
            let pad = if center { n_fft as isize / 2 } else { 0 };
            for t in 0..spec.n_frames {
                for k in 0..spec.n_bins {
                    let (mut re, mut im) = (0.0f64, 0.0f64);
                    for (i, &wi) in w.iter().enumerate() {
                        let j = (t * hop + i) as isize - pad;
                        let v = if j >= 0 && (j as usize) < x.len() {
                            x[j as usize]
                        } else {
                            0.0
                        };
                        let v = f64::from(v) * f64::from(wi);
                        let ang = -2.0 * std::f64::consts::PI * (k * i) as f64 / n_fft as f64;
                        re += v * ang.cos();
                        im += v * ang.sin();
                    }
                    let got = spec.frame(t)[k];
                    assert!((f64::from(got.re) - re).abs() < 1e-4, "t {t} k {k}");
                    assert!((f64::from(got.im) - im).abs() < 1e-4, "t {t} k {k}");
                }
            }
        }
    }

    #[test]
    fn frame_counts_and_validation() {
        let c = StftConfig::default();
        assert_eq!(c.n_frames(0), 0);
        assert_eq!(c.n_frames(1), 1);
        assert_eq!(c.n_frames(12000), 1 + 12000 / 256);
        let u = StftConfig { center: false, ..c };
        assert_eq!(u.n_frames(1023), 0);
        assert_eq!(u.n_frames(1024), 1);
        assert_eq!(u.n_frames(1024 + 256), 2);
        assert!(Stft::new(StftConfig { hop_length: 0, ..c }).is_err());
        let e = Stft::new(StftConfig {
            win_length: 2048,
            ..c
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                AudioError::InvalidConfig {
                    field: "win_length",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn hann_is_periodic_and_centred() {
        let w = hann_window(4, 4);
        assert_eq!(w, vec![0.0, 0.5, 1.0, 0.5]);
        let w = hann_window(4, 8);
        assert_eq!(w, vec![0.0, 0.0, 0.0, 0.5, 1.0, 0.5, 0.0, 0.0]);
    }

    #[test]
    fn magnitude_and_power() {
        let s = Spectrogram {
            n_frames: 1,
            n_bins: 2,
            data: vec![Complex::new(3.0, 4.0), Complex::new(0.0, -2.0)],
        };
        assert_eq!(s.magnitude(), vec![5.0, 2.0]);
        assert_eq!(s.power(), vec![25.0, 4.0]);
    }
}
