//! Griffin-Lim phase reconstruction (Griffin & Lim 1984) with the "fast" momentum of Perraudin,
//! Balazs & Søndergaard 2013 (librosa's default `momentum = 0.99`): a training-free way from a
//! magnitude spectrogram, or a log-mel spectrogram through the pseudo-inverse of the mel
//! filterbank, to a waveform. Runs host-side on `voxspec_audio::Stft`.
//!
//! ```text
//! X₀ = S · e^{iφ₀}              φ₀ = 0 (or a seeded random phase)
//! repeat n_iter times:
//!   y      = istft(X)
//!   R      = stft(y)                          (consistent spectrogram closest to X)
//!   X      = S · e^{i∠(R + α (R − R_prev))}   (α = momentum; α = 0 is plain Griffin-Lim)
//! ```
//!
//! Every iteration records the spectral convergence `‖S − |stft(y)|‖_F / ‖S‖_F`.

use voxspec_audio::{Complex, LogMel, MelConfig, Spectrogram, Stft, StftConfig};

use crate::error::VocoderError;

/// Griffin-Lim settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GriffinLimConfig {
    /// Iterations.
    pub n_iter: usize,
    /// Fast Griffin-Lim momentum α in `[0, 1)`; 0 is the original algorithm.
    pub momentum: f32,
    /// `Some(seed)`: random initial phase from this seed; `None`: zero phase.
    pub random_init: Option<u64>,
}

impl Default for GriffinLimConfig {
    /// 32 iterations, momentum 0.99, zero initial phase.
    fn default() -> Self {
        Self {
            n_iter: 32,
            momentum: 0.99,
            random_init: None,
        }
    }
}

/// Griffin-Lim iterations a vocoder runs from its own predicted phase on the magnitude its input
/// log-mel stands for ([`MelInverse`], [`refine_phase`]). The head's own magnitude is not
/// what its overlap-add produces (frames with disagreeing phases partly cancel), so it is not
/// the magnitude to keep; the mel's is.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PhaseRefinement {
    /// Iterations; 0 renders the vocoder's spectrum as it is.
    pub iterations: usize,
    /// Fast Griffin-Lim momentum α in `[0, 1)`.
    pub momentum: f32,
}

impl PhaseRefinement {
    /// None (0 iterations); momentum 0.99 once iterations are set.
    pub const NONE: Self = Self {
        iterations: 0,
        momentum: 0.99,
    };
}

impl Default for PhaseRefinement {
    /// [`PhaseRefinement::NONE`].
    fn default() -> Self {
        Self::NONE
    }
}

/// A waveform and how well its STFT magnitude matches the target after every iteration.
#[derive(Debug, Clone)]
pub struct GriffinLimOutput {
    /// The reconstruction, `length` samples.
    pub wave: Vec<f32>,
    /// Spectral convergence of the signal after each iteration (`n_iter` values).
    pub spectral_convergence: Vec<f32>,
}

/// `‖S − |X|‖_F / ‖S‖_F` between a target magnitude and a spectrogram (0 for an all-zero target).
pub fn spectral_convergence(target: &[f32], spec: &Spectrogram) -> f32 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (s, x) in target.iter().zip(&spec.data) {
        let d = f64::from(*s) - f64::from(x.norm());
        num += d * d;
        den += f64::from(*s) * f64::from(*s);
    }
    if den > 0.0 {
        (num / den).sqrt() as f32
    } else {
        0.0
    }
}

/// Reconstructs a waveform from a magnitude spectrogram `[n_frames, n_bins]` (row-major, as
/// [`Spectrogram::magnitude`]) with the framing `stft` was planned with.
///
/// # Errors
/// [`VocoderError::Shape`] when `magnitude.len()` is not `n_frames · n_bins`;
/// [`VocoderError::InvalidConfig`] for a momentum outside `[0, 1)`.
pub fn griffin_lim(
    stft: &Stft,
    magnitude: &[f32],
    n_frames: usize,
    length: usize,
    cfg: &GriffinLimConfig,
) -> Result<GriffinLimOutput, VocoderError> {
    let n_bins = stft.config().n_bins();
    if magnitude.len() != n_frames * n_bins || n_frames == 0 {
        return Err(VocoderError::Shape {
            what: "Griffin-Lim magnitude",
            expected: format!("[n_frames >= 1, {n_bins}] = {} values", n_frames * n_bins),
            found: vec![magnitude.len()],
        });
    }
    check_momentum("momentum", cfg.momentum)?;
    let phase0 = initial_phase(magnitude.len(), cfg.random_init);
    let spec = Spectrogram {
        n_frames,
        n_bins,
        data: magnitude.iter().zip(&phase0).map(|(&m, p)| p * m).collect(),
    };
    Ok(iterate(
        stft,
        magnitude,
        spec,
        length,
        cfg.n_iter,
        cfg.momentum,
    ))
}

/// Makes a predicted complex spectrogram consistent: `n_iter` Griffin-Lim iterations that keep
/// its magnitude and start from its own phase instead of zero or random phase. A vocoder that
/// predicts each frame's phase on its own leaves frames whose overlap-add interferes (a buzz at
/// the frame rate); a few iterations from its phase remove that while keeping what it got right.
/// `n_iter = 0` returns the plain inverse STFT of `spectrum`.
///
/// # Shapes
/// `spectrum: [n_frames, n_fft / 2 + 1]` → `[length]` samples.
///
/// # Errors
/// [`VocoderError::Shape`] when the spectrogram does not match `stft`'s bins or has no frames;
/// [`VocoderError::InvalidConfig`] for a momentum outside `[0, 1)`.
pub fn refine_phase(
    stft: &Stft,
    spectrum: Spectrogram,
    length: usize,
    n_iter: usize,
    momentum: f32,
) -> Result<Vec<f32>, VocoderError> {
    let n_bins = stft.config().n_bins();
    if spectrum.n_bins != n_bins
        || spectrum.n_frames == 0
        || spectrum.data.len() != spectrum.n_frames * n_bins
    {
        return Err(VocoderError::Shape {
            what: "phase refinement spectrum",
            expected: format!("[n_frames >= 1, {n_bins}]"),
            found: vec![spectrum.n_frames, spectrum.n_bins, spectrum.data.len()],
        });
    }
    check_momentum("momentum", momentum)?;
    if n_iter == 0 {
        return Ok(stft.inverse(&spectrum, Some(length)));
    }
    let magnitude = spectrum.magnitude();
    Ok(iterate(stft, &magnitude, spectrum, length, n_iter, momentum).wave)
}

/// The (fast) Griffin-Lim loop from the spectrogram `spec`, whose phase is the start and whose
/// magnitude is replaced by `magnitude` at every step.
fn iterate(
    stft: &Stft,
    magnitude: &[f32],
    mut spec: Spectrogram,
    length: usize,
    n_iter: usize,
    alpha: f32,
) -> GriffinLimOutput {
    let (n_frames, n_bins) = (spec.n_frames, spec.n_bins);
    let mut previous: Option<Vec<Complex<f32>>> = None;
    let mut sc = Vec::with_capacity(n_iter);
    let mut wave = stft.inverse(&spec, Some(length));
    for _ in 0..n_iter {
        let rebuilt = stft.forward(&wave);
        // The consistent spectrogram's frame count can differ from the target's when `length`
        // does not match it; compare and update on the common frames only.
        sc.push(spectral_convergence(magnitude, &rebuilt));
        let frames = rebuilt.n_frames.min(n_frames);
        let mut accel = rebuilt.data.clone();
        if let Some(prev) = &previous {
            for (a, p) in accel.iter_mut().zip(prev) {
                *a += (*a - *p) * alpha;
            }
        }
        for i in 0..frames * n_bins {
            let norm = accel[i].norm();
            let unit = if norm > 1e-12 {
                accel[i] / norm
            } else {
                Complex::new(1.0, 0.0)
            };
            spec.data[i] = unit * magnitude[i];
        }
        previous = Some(rebuilt.data);
        wave = stft.inverse(&spec, Some(length));
    }
    // The last entry describes the returned wave.
    if let Some(last) = sc.last_mut() {
        *last = spectral_convergence(magnitude, &stft.forward(&wave));
    }
    GriffinLimOutput {
        wave,
        spectral_convergence: sc,
    }
}

/// Reconstructs a waveform from a log-mel spectrogram `[n_frames, n_mels]` (as
/// [`LogMel::compute`]): undo the log, `S ≈ max(0, M⁺ · mel)^(1/power)` with `M⁺` the
/// pseudo-inverse of the filterbank, then [`griffin_lim`]. The output has
/// `hop · (n_frames − 1)` samples.
///
/// # Errors
/// As [`griffin_lim`]; [`VocoderError::Audio`] for a bad `mel_cfg`.
pub fn griffin_lim_from_log_mel(
    mel_cfg: &MelConfig,
    log_mel: &[f32],
    n_frames: usize,
    cfg: &GriffinLimConfig,
) -> Result<GriffinLimOutput, VocoderError> {
    let front = LogMel::new(*mel_cfg)?;
    let n_mels = front.n_mels();
    let stft_cfg: StftConfig = mel_cfg.stft_config();
    if log_mel.len() != n_frames * n_mels || n_frames == 0 {
        return Err(VocoderError::Shape {
            what: "Griffin-Lim log-mel",
            expected: format!("[n_frames >= 1, {n_mels}] = {} values", n_frames * n_mels),
            found: vec![log_mel.len()],
        });
    }
    let magnitude = MelInverse::new(mel_cfg)?.magnitude(log_mel, n_frames);
    let stft = Stft::new(stft_cfg)?;
    let length = stft_cfg.hop_length * (n_frames - 1);
    griffin_lim(&stft, &magnitude, n_frames, length, cfg)
}

/// A fast Griffin-Lim momentum must lie in `[0, 1)`; `field` names it in the error.
pub(crate) fn check_momentum(field: &'static str, momentum: f32) -> Result<(), VocoderError> {
    if (0.0..1.0).contains(&momentum) {
        Ok(())
    } else {
        Err(VocoderError::InvalidConfig {
            field,
            reason: format!("must lie in [0, 1), got {momentum}"),
        })
    }
}

/// The linear magnitude a log-mel stands for: `max(0, M⁺ · exp(log_mel))^(1/power)` with `M⁺`
/// the filterbank's pseudo-inverse, computed once per mel configuration.
#[derive(Debug, Clone)]
pub struct MelInverse {
    /// `M⁺`, `[n_bins, n_mels]`.
    pinv: Vec<f64>,
    n_mels: usize,
    n_bins: usize,
    inv_power: f32,
}

impl MelInverse {
    /// The inverse of `mel_cfg`'s filterbank.
    ///
    /// # Errors
    /// [`VocoderError::Audio`] for a bad `mel_cfg`.
    pub fn new(mel_cfg: &MelConfig) -> Result<Self, VocoderError> {
        let front = LogMel::new(*mel_cfg)?;
        let n_mels = front.n_mels();
        let n_bins = mel_cfg.stft_config().n_bins();
        Ok(Self {
            pinv: pseudo_inverse(front.filterbank(), n_mels, n_bins),
            n_mels,
            n_bins,
            inv_power: 1.0 / mel_cfg.power.max(1e-6),
        })
    }

    /// The magnitude of a log-mel.
    ///
    /// # Shapes
    /// `log_mel: [n_frames, n_mels]` row-major → `[n_frames, n_bins]` row-major.
    pub fn magnitude(&self, log_mel: &[f32], n_frames: usize) -> Vec<f32> {
        let (n_mels, n_bins) = (self.n_mels, self.n_bins);
        let mut magnitude = vec![0.0f32; n_frames * n_bins];
        for t in 0..n_frames {
            let mel: Vec<f64> = log_mel[t * n_mels..(t + 1) * n_mels]
                .iter()
                .map(|v| f64::from(v.exp()))
                .collect();
            for k in 0..n_bins {
                let v: f64 = (0..n_mels)
                    .map(|m| self.pinv[k * n_mels + m] * mel[m])
                    .sum();
                magnitude[t * n_bins + k] = (v.max(0.0) as f32).powf(self.inv_power);
            }
        }
        magnitude
    }
}

/// Moore-Penrose pseudo-inverse `[n_bins, n_mels]` of a filterbank `[n_mels, n_bins]` of full row
/// rank: `Mᵀ (M Mᵀ + λI)⁻¹` with a tiny ridge λ (relative to the trace) for numerical safety.
pub fn pseudo_inverse(filters: &[f32], n_mels: usize, n_bins: usize) -> Vec<f64> {
    let m = |i: usize, k: usize| f64::from(filters[i * n_bins + k]);
    // G = M Mᵀ + λI, [n_mels, n_mels]
    let mut g = vec![0.0f64; n_mels * n_mels];
    for i in 0..n_mels {
        for j in 0..n_mels {
            g[i * n_mels + j] = (0..n_bins).map(|k| m(i, k) * m(j, k)).sum();
        }
    }
    let trace: f64 = (0..n_mels).map(|i| g[i * n_mels + i]).sum();
    let ridge = 1e-10 * trace / n_mels.max(1) as f64 + f64::MIN_POSITIVE;
    for i in 0..n_mels {
        g[i * n_mels + i] += ridge;
    }
    let g_inv = invert_spd(g, n_mels);
    // Mᵀ G⁻¹, [n_bins, n_mels]
    let mut out = vec![0.0f64; n_bins * n_mels];
    for k in 0..n_bins {
        for j in 0..n_mels {
            out[k * n_mels + j] = (0..n_mels).map(|i| m(i, k) * g_inv[i * n_mels + j]).sum();
        }
    }
    out
}

/// Inverse of a symmetric positive-definite matrix by Gauss-Jordan elimination with partial
/// pivoting (rows whose pivot vanishes are left at zero, which yields a generalised inverse).
fn invert_spd(mut a: Vec<f64>, n: usize) -> Vec<f64> {
    let mut inv = vec![0.0f64; n * n];
    for i in 0..n {
        inv[i * n + i] = 1.0;
    }
    for col in 0..n {
        let pivot_row = (col..n)
            .max_by(|&r, &s| a[r * n + col].abs().total_cmp(&a[s * n + col].abs()))
            .unwrap_or(col);
        if a[pivot_row * n + col].abs() < 1e-300 {
            continue;
        }
        if pivot_row != col {
            for j in 0..n {
                a.swap(pivot_row * n + j, col * n + j);
                inv.swap(pivot_row * n + j, col * n + j);
            }
        }
        let p = a[col * n + col];
        for j in 0..n {
            a[col * n + j] /= p;
            inv[col * n + j] /= p;
        }
        for r in 0..n {
            if r != col {
                let f = a[r * n + col];
                if f != 0.0 {
                    for j in 0..n {
                        a[r * n + j] -= f * a[col * n + j];
                        inv[r * n + j] -= f * inv[col * n + j];
                    }
                }
            }
        }
    }
    inv
}

/// Unit phasors: all `1` without a seed, else uniform random angles from a 64-bit LCG.
fn initial_phase(n: usize, seed: Option<u64>) -> Vec<Complex<f32>> {
    match seed {
        None => vec![Complex::new(1.0, 0.0); n],
        Some(seed) => {
            let mut s = seed ^ 0x9E37_79B9_7F4A_7C15;
            (0..n)
                .map(|_| {
                    s = s
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    let u = (s >> 40) as f32 / (1u64 << 24) as f32;
                    Complex::from_polar(1.0, 2.0 * std::f32::consts::PI * u)
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_inverse_is_a_right_inverse_of_a_full_rank_filterbank() {
        let cfg = MelConfig {
            n_fft: 256,
            hop_length: 64,
            win_length: 256,
            n_mels: 20,
            ..MelConfig::default()
        };
        let front = LogMel::new(cfg).unwrap();
        let (n_mels, n_bins) = (20, 129);
        let pinv = pseudo_inverse(front.filterbank(), n_mels, n_bins);
        // M · M⁺ = I
        for i in 0..n_mels {
            for j in 0..n_mels {
                let v: f64 = (0..n_bins)
                    .map(|k| f64::from(front.filterbank()[i * n_bins + k]) * pinv[k * n_mels + j])
                    .sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((v - want).abs() < 1e-6, "({i},{j}) = {v}");
            }
        }
    }
}
