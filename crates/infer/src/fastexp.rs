//! A branch-free `exp` the compiler vectorises, and the exponential pass of the sampler's
//! softmaxes built on it. libm's `expf` is one call per value: a decoding step of the main
//! job's MTP model with 8 heads and Viterbi path selection took ~4 000 of them on the host
//! (two softmaxes of 257 scores per head), a third of the step's host time. The native
//! engine's attention softmax and SwiGLU use the same [`exp`].

/// `e^x` in f32, branch-free (Cody–Waite range reduction `x = n·ln 2 + r`, `|r| ≤ ln 2 / 2`,
/// `e^r` by Cephes' degree-6 polynomial, `2^n` through the exponent bits). Relative error below
/// 3e-7 for `x` in `[-87.3, 88.3]` (tested against f64); inputs below saturate at `e^-87.3`
/// (≈ 1.2e-38, the smallest normal f32, never a denormal), inputs above at `e^88.3`; NaN stays
/// NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2^23: adding it rounds to an integer (to nearest even) in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-87.3, 88.3);
    let t = xc * LOG2E + ROUND;
    let n = t - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let er = p * r * r + r + 1.0;
    // n is the integer in t's low mantissa bits: t = 2^23 · 1.5 + n.
    let ni = t.to_bits() as i32 - 0x4B40_0000;
    let scale = f32::from_bits(((ni + 127) << 23) as u32);
    let y = er * scale;
    if x.is_nan() { x } else { y }
}

/// Below this a shifted score's exponential is 0 in [`exp_shifted`] (where [`exp`] saturates).
const UNDERFLOW: f32 = -87.3;

/// `out[i] = e^((v[i] − max) · inv_t)` for the scores `v` of a softmax, and their sum in f64
/// (eight partial sums, added in order at the end). A shifted score below −87.3 (−∞ among them:
/// a banned token) gives exactly 0, so what the scores rule out is never drawn; NaN stays NaN.
///
/// # Shapes
/// `out` has `v.len()` values.
pub(crate) fn exp_shifted(v: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> f64 {
    debug_assert_eq!(v.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above).
        return unsafe { exp_shifted_avx512(v, max, inv_t, out) };
    }
    exp_shifted_body(v, max, inv_t, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exp_shifted_avx512(v: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> f64 {
    exp_shifted_body(v, max, inv_t, out)
}

/// Partial sums of [`exp_shifted`] (one zmm of f64).
const LANES: usize = 8;

#[inline(always)]
fn exp_shifted_body(v: &[f32], max: f32, inv_t: f32, out: &mut [f32]) -> f64 {
    // Two simple loops, each of which the compiler vectorises (one fused loop it did not).
    for (o, &x) in out.iter_mut().zip(v) {
        let s = (x - max) * inv_t;
        *o = if s < UNDERFLOW { 0.0 } else { exp(s) };
    }
    sum_f64_body(out)
}

/// `Σ v` in f64, in [`LANES`] partial sums added in order at the end (a single running sum
/// waits on each add).
pub(crate) fn sum_f64(v: &[f32]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above).
        return unsafe { sum_f64_avx512(v) };
    }
    sum_f64_body(v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn sum_f64_avx512(v: &[f32]) -> f64 {
    sum_f64_body(v)
}

#[inline(always)]
fn sum_f64_body(v: &[f32]) -> f64 {
    let mut sum = [0.0f64; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for (acc, &x) in sum.iter_mut().zip(c) {
            *acc += f64::from(x);
        }
    }
    for (acc, &x) in sum.iter_mut().zip(chunks.remainder()) {
        *acc += f64::from(x);
    }
    sum.iter().sum()
}

/// The largest finite value of `v` (−∞ when none is finite: empty, or only ±∞ and NaN).
pub(crate) fn finite_max(v: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked just above).
        return unsafe { finite_max_avx512(v) };
    }
    finite_max_body(v)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn finite_max_avx512(v: &[f32]) -> f32 {
    finite_max_body(v)
}

/// Lanes of [`finite_max`] (one zmm of f32).
const MAX_LANES: usize = 16;

#[inline(always)]
fn finite_max_body(v: &[f32]) -> f32 {
    // A select per lane (not `f32::max`, whose NaN rule keeps the compiler scalar).
    let mut max = [f32::NEG_INFINITY; MAX_LANES];
    let mut chunks = v.chunks_exact(MAX_LANES);
    for c in &mut chunks {
        for (m, &x) in max.iter_mut().zip(c) {
            *m = if x.is_finite() && x > *m { x } else { *m };
        }
    }
    for (m, &x) in max.iter_mut().zip(chunks.remainder()) {
        *m = if x.is_finite() && x > *m { x } else { *m };
    }
    max.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_3e7_of_f64() {
        let mut worst = 0.0f64;
        let steps = 400_000;
        for i in 0..=steps {
            let x = -87.3 + (88.3 + 87.3) * i as f32 / steps as f32;
            let want = f64::from(x).exp();
            let rel = ((f64::from(exp(x)) - want) / want).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1e4) > 0.0 && exp(-1e4) < 1.3e-38);
        assert!(exp(1e4).is_finite() && exp(1e4) > 1e38);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(f32::NEG_INFINITY) < 1.3e-38);
    }

    #[test]
    fn finite_max_skips_what_is_not_finite() {
        let mut v: Vec<f32> = (0..40).map(|i| (i as f32 * 0.9).cos()).collect();
        let want = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        v[3] = f32::INFINITY;
        v[17] = f32::NAN;
        v[39] = f32::NAN;
        assert_eq!(finite_max(&v), want);
        assert_eq!(finite_max(&[]), f32::NEG_INFINITY);
        assert_eq!(finite_max(&[f32::NAN, f32::INFINITY]), f32::NEG_INFINITY);
        assert_eq!(finite_max(&[f32::NEG_INFINITY, -3.0]), -3.0);
    }

    #[test]
    fn the_shifted_pass_matches_f64_zeroes_what_is_ruled_out_and_sums() {
        // 37 values: four full chunks of eight and a remainder.
        let mut v: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 6.0).collect();
        v[5] = f32::NEG_INFINITY;
        v[30] = -200.0;
        let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut out = vec![f32::NAN; v.len()];
        let sum = exp_shifted(&v, max, 1.0 / 0.8f32, &mut out);
        assert_eq!(out[5], 0.0, "a banned token");
        assert_eq!(out[30], 0.0, "past the underflow");
        let mut want_sum = 0.0f64;
        for (i, (&x, &o)) in v.iter().zip(&out).enumerate() {
            // The shifted score as the pass forms it (f32), its exponential in f64.
            let s = (x - max) * (1.0 / 0.8f32);
            let want = if s < -87.3 { 0.0 } else { f64::from(s).exp() };
            want_sum += want;
            assert!(
                (f64::from(o) - want).abs() <= 3e-7 * want,
                "{i}: {o} vs {want}"
            );
        }
        assert!(
            (sum - want_sum).abs() < 1e-6 * want_sum,
            "{sum} vs {want_sum}"
        );
        let direct: f64 = out.iter().map(|&o| f64::from(o)).sum();
        assert!((sum - direct).abs() < 1e-12 * direct);
    }
}
