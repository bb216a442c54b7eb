//! Elementwise math of the engine's hot loops, written so the compiler vectorises it: `exp` as a
//! branch-free polynomial (`voxspec_infer::fastexp::exp`, shared with the sampler; libm's
//! `expf` is one call per value, and a decoding step of the main job's model takes ~60 000 of
//! them in its softmaxes and SwiGLUs), and the slice operations
//! built on it — the attention softmax and SwiGLU — compiled for AVX-512F when the CPU has it.
//!
//! Every path computes the same operations in the same order per value (no fused multiply-add,
//! which Rust never contracts on its own), so the AVX-512 and the baseline builds of a slice
//! operation give bit-identical results; only the reductions of the softmax (row maximum and
//! sum) are split into 16 lanes, in every build alike.

use crate::matmul::Kernel;

/// Lanes of the softmax reductions (one zmm of f32).
const LANES: usize = 16;

pub use voxspec_infer::fastexp::exp;

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

/// `erf(x)` by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7 in exact arithmetic)
/// through [`exp`], branch-free so a slice of them vectorises.
#[inline(always)]
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// GELU, erf form (`x · (1 + erf(x / √2)) / 2`, as Burn's `gelu`), of every value in place.
pub fn gelu_in_place(x: &mut [f32]) {
    match Kernel::detect().widening() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
        Kernel::Avx512 => unsafe { gelu_avx512(x) },
        _ => gelu_body(x),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gelu_avx512(x: &mut [f32]) {
    gelu_body(x);
}

#[inline(always)]
fn gelu_body(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2)) * 0.5;
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

/// SwiGLU on a row whose gate and up columns alternate in blocks of `block`:
/// `[g₀ | u₀ | g₁ | u₁ | …]` → `out = [silu(g₀)·u₀ | silu(g₁)·u₁ | …]`.
///
/// # Shapes
/// - `gate_up`: `[2·blocks·block]`
/// - `out`: `[blocks·block]`
pub fn swiglu_interleaved(gate_up: &[f32], block: usize, out: &mut [f32]) {
    match Kernel::detect().widening() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
        Kernel::Avx512 => unsafe { swiglu_interleaved_avx512(gate_up, block, out) },
        _ => swiglu_interleaved_body(gate_up, block, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn swiglu_interleaved_avx512(gate_up: &[f32], block: usize, out: &mut [f32]) {
    swiglu_interleaved_body(gate_up, block, out);
}

#[inline(always)]
fn swiglu_interleaved_body(gate_up: &[f32], block: usize, out: &mut [f32]) {
    for (gu, o) in gate_up
        .chunks_exact(2 * block)
        .zip(out.chunks_exact_mut(block))
    {
        let (g, u) = gu.split_at(block);
        silu_mul(g, u, o);
    }
}

/// `out[i] = silu(gate[i]) · up[i]`.
#[inline(always)]
fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) {
    for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
        *o = silu(g) * u;
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
        silu_mul(g, u, o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_and_gelu_match_libm() {
        let xs: Vec<f32> = (-2000..=2000).map(|i| i as f32 / 250.0).collect();
        for &x in &xs {
            let (got, want) = (erf(x), libm::erff(x));
            assert!((got - want).abs() < 4e-7, "erf({x}) = {got}, libm {want}");
        }
        let mut g = xs.clone();
        gelu_in_place(&mut g);
        let mut base = xs.clone();
        gelu_body(&mut base);
        for ((&x, &got), &b) in xs.iter().zip(&g).zip(&base) {
            let want = crate::ops::gelu(x);
            assert!(
                (got - want).abs() < 4e-6 * x.abs().max(1.0),
                "gelu({x}) = {got}, {want}"
            );
            assert_eq!(
                got.to_bits(),
                b.to_bits(),
                "the AVX-512 build differs at {x}"
            );
        }
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
