//! Elementwise math of the engine's hot loops, written so the compiler vectorises it: `exp` as a
//! branch-free polynomial (libm's `expf` is one call per value, and a decoding step of the main
//! job's model takes ~60 000 of them in its softmaxes and SwiGLUs), and the slice operations
//! built on it — the attention softmax and SwiGLU — compiled for AVX-512F when the CPU has it.
//!
//! Every path computes the same operations in the same order per value (no fused multiply-add,
//! which Rust never contracts on its own), so the AVX-512 and the baseline builds of a slice
//! operation give bit-identical results; only the reductions of the softmax (row maximum and
//! sum) are split into 16 lanes, in every build alike.

use crate::matmul::Kernel;

/// Lanes of the softmax reductions (one zmm of f32).
const LANES: usize = 16;

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

/// `x · sigmoid(x)` through [`exp`].
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `s ← softmax(s · scale)` in place: scaled after the dot products, the row maximum
/// subtracted, normalised by division (as `voxspec-nn`'s attention computes it).
pub fn softmax_scaled(s: &mut [f32], scale: f32) {
    match Kernel::detect().widening() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
        Kernel::Avx512 => unsafe { softmax_avx512(s, scale) },
        _ => softmax_body(s, scale),
    }
}

/// SwiGLU on a `[rows, 2·ff]` buffer holding `[gate | up]` per row: `out = silu(gate) · up`.
///
/// # Shapes
/// - `gate_up`: `[rows, 2·ff]`
/// - `out`: `[rows, ff]`
pub fn swiglu(gate_up: &[f32], ff: usize, out: &mut [f32]) {
    match Kernel::detect().widening() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
        Kernel::Avx512 => unsafe { swiglu_avx512(gate_up, ff, out) },
        _ => swiglu_body(gate_up, ff, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_avx512(s: &mut [f32], scale: f32) {
    softmax_body(s, scale);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn swiglu_avx512(gate_up: &[f32], ff: usize, out: &mut [f32]) {
    swiglu_body(gate_up, ff, out);
}

#[inline(always)]
fn softmax_body(s: &mut [f32], scale: f32) {
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut chunks = s.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (m, v) in max.iter_mut().zip(c.iter_mut()) {
            *v *= scale;
            *m = m.max(*v);
        }
    }
    for (m, v) in max.iter_mut().zip(chunks.into_remainder()) {
        *v *= scale;
        *m = m.max(*v);
    }
    let max = max.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = [0.0f32; LANES];
    let mut chunks = s.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for (acc, v) in sum.iter_mut().zip(c.iter_mut()) {
            *v = exp(*v - max);
            *acc += *v;
        }
    }
    for (acc, v) in sum.iter_mut().zip(chunks.into_remainder()) {
        *v = exp(*v - max);
        *acc += *v;
    }
    let sum: f32 = sum.iter().sum();
    for v in s.iter_mut() {
        *v /= sum;
    }
}

#[inline(always)]
fn swiglu_body(gate_up: &[f32], ff: usize, out: &mut [f32]) {
    for (gu, o) in gate_up.chunks_exact(2 * ff).zip(out.chunks_exact_mut(ff)) {
        let (g, u) = gu.split_at(ff);
        for ((o, &g), &u) in o.iter_mut().zip(g).zip(u) {
            *o = silu(g) * u;
        }
    }
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
    fn silu_saturates_both_ways() {
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!(silu(-200.0).abs() < 1e-30);
        assert_eq!(silu(200.0), 200.0);
    }

    /// The dispatched softmax (AVX-512 where the CPU has it) equals the baseline body bit for
    /// bit and a softmax in f64 to 1e-6, on rows shorter and longer than the lane count.
    #[test]
    fn softmax_matches_f64_and_the_baseline_build() {
        for len in [1usize, 5, 16, 37, 300] {
            let row: Vec<f32> = (0..len)
                .map(|i| ((i * 7919) % 101) as f32 / 9.0 - 5.0)
                .collect();
            let mut got = row.clone();
            softmax_scaled(&mut got, 0.7);
            let mut base = row.clone();
            softmax_body(&mut base, 0.7);
            assert_eq!(got, base, "len {len}");
            let max = row
                .iter()
                .map(|&v| f64::from(v) * 0.7)
                .fold(f64::MIN, f64::max);
            let z: f64 = row.iter().map(|&v| (f64::from(v) * 0.7 - max).exp()).sum();
            for (g, &v) in got.iter().zip(&row) {
                let want = (f64::from(v) * 0.7 - max).exp() / z;
                assert!(
                    (f64::from(*g) - want).abs() < 1e-6,
                    "len {len}: {g} vs {want}"
                );
            }
        }
    }

    #[test]
    fn swiglu_matches_its_definition() {
        let gate_up: Vec<f32> = (0..2 * 3 * 40).map(|i| (i as f32 - 120.0) / 13.0).collect();
        let mut out = vec![0.0; 3 * 40];
        swiglu(&gate_up, 40, &mut out);
        let mut base = vec![0.0; 3 * 40];
        swiglu_body(&gate_up, 40, &mut base);
        assert_eq!(out, base);
        for (r, row) in gate_up.chunks(80).enumerate() {
            for j in 0..40 {
                let g = f64::from(row[j]);
                let want = g / (1.0 + (-g).exp()) * f64::from(row[40 + j]);
                let got = f64::from(out[r * 40 + j]);
                assert!(
                    (got - want).abs() < 1e-5 * (1.0 + want.abs()),
                    "{got} vs {want}"
                );
            }
        }
    }
}
