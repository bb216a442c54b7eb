//! Row-wise operations of the transformer, each computed the way `voxspec-nn` (Burn) computes
//! it so the engine matches it to rounding: RMSNorm and LayerNorm over the last axis, rotary
//! positions in the half-split layout, GELU (erf form); SiLU and SwiGLU live in [`crate::vmath`].
//! The norms and RoPE run compiled for AVX-512F when the CPU has it (as `vmath`'s slices do).

use crate::matmul::Kernel;

/// Parameters of one normalisation layer.
#[derive(Debug, Clone)]
pub enum NormWeights {
    /// RMSNorm: `x / sqrt(mean(x²) + eps) · gamma` (Burn's `RmsNorm`).
    Rms {
        /// `[d]`.
        gamma: Vec<f32>,
        /// Epsilon.
        eps: f32,
    },
    /// LayerNorm: `(x − mean) / sqrt(var + eps) · gamma + beta`, biased variance.
    Layer {
        /// `[d]`.
        gamma: Vec<f32>,
        /// `[d]`, zeros when the layer has none.
        beta: Vec<f32>,
        /// Epsilon.
        eps: f32,
    },
}

impl NormWeights {
    /// Normalises every row of `x` into `out`.
    ///
    /// # Shapes
    /// - `x`, `out`: `[rows, d]` row-major, `d` the norm's width
    pub fn forward(&self, x: &[f32], out: &mut [f32]) {
        match Kernel::detect().widening() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
            Kernel::Avx512 => unsafe { self.forward_avx512(x, out) },
            _ => self.forward_body(x, out),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn forward_avx512(&self, x: &[f32], out: &mut [f32]) {
        self.forward_body(x, out);
    }

    /// The row sums run in [`LANES`] partial sums (a single running sum keeps the compiler
    /// from vectorising: one add per value, each waiting for the last).
    #[inline(always)]
    fn forward_body(&self, x: &[f32], out: &mut [f32]) {
        match self {
            NormWeights::Rms { gamma, eps } => {
                let d = gamma.len();
                for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                    let ms = lane_sum(xr, |v| v * v) / d as f32;
                    let rms = (ms + eps).sqrt();
                    for ((o, &v), &g) in or.iter_mut().zip(xr).zip(gamma) {
                        *o = v / rms * g;
                    }
                }
            }
            NormWeights::Layer { gamma, beta, eps } => {
                let d = gamma.len();
                for (xr, or) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
                    let mean = lane_sum(xr, |v| v) / d as f32;
                    let var = lane_sum(xr, |v| (v - mean) * (v - mean)) / d as f32;
                    let inv = 1.0 / (var + eps).sqrt();
                    for (((o, &v), &g), &b) in or.iter_mut().zip(xr).zip(gamma).zip(beta) {
                        *o = (v - mean) * inv * g + b;
                    }
                }
            }
        }
    }
}

/// Partial sums of the row reductions (one zmm of f32).
const LANES: usize = 16;

/// `Σ f(v)` over `xs` in [`LANES`] partial sums, added in order at the end.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    for (a, &v) in acc.iter_mut().zip(chunks.remainder()) {
        *a += f(v);
    }
    acc.iter().sum()
}

pub use crate::vmath::{silu, swiglu};

/// GELU, erf form: `x · (1 + erf(x / √2)) / 2`.
#[inline]
pub fn gelu(x: f32) -> f32 {
    x * (1.0 + libm::erff(x / std::f32::consts::SQRT_2)) / 2.0
}

/// Rotary tables as `voxspec-nn` builds them: `cos[p, i] = cos(p·θ_i)` for both halves,
/// `sin[p, i] = −sin(p·θ_i)` on the first half and `+sin` on the second, with
/// `θ_i = theta^(−2i / head_dim)`.
#[derive(Debug, Clone)]
pub struct RopeTables {
    head_dim: usize,
    /// `[max_seq_len, head_dim]`.
    cos: Vec<f32>,
    /// `[max_seq_len, head_dim]`, signs folded in.
    sin: Vec<f32>,
}

impl RopeTables {
    /// Tables for positions `0..max_seq_len` (`head_dim` even).
    pub fn new(max_seq_len: usize, head_dim: usize, theta: f64) -> Self {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(max_seq_len * head_dim);
        let mut sin = Vec::with_capacity(max_seq_len * head_dim);
        for p in 0..max_seq_len {
            let angles: Vec<f64> = (0..half)
                .map(|i| p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64))
                .collect();
            for _ in 0..2 {
                cos.extend(angles.iter().map(|a| a.cos() as f32));
            }
            sin.extend(angles.iter().map(|a| -a.sin() as f32));
            sin.extend(angles.iter().map(|a| a.sin() as f32));
        }
        Self { head_dim, cos, sin }
    }

    /// Rotates each head of `x` (heads of `head_dim`, head-major) to position `pos`:
    /// `x · cos + (x₂, x₁) · sin`.
    ///
    /// # Shapes
    /// - `x`: `[heads · head_dim]`
    pub fn apply(&self, x: &mut [f32], pos: usize) {
        match Kernel::detect().widening() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
            Kernel::Avx512 => unsafe { self.apply_avx512(x, pos) },
            _ => self.apply_body(x, pos),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn apply_avx512(&self, x: &mut [f32], pos: usize) {
        self.apply_body(x, pos);
    }

    #[inline(always)]
    fn apply_body(&self, x: &mut [f32], pos: usize) {
        let hd = self.head_dim;
        let half = hd / 2;
        let cos = &self.cos[pos * hd..(pos + 1) * hd];
        let sin = &self.sin[pos * hd..(pos + 1) * hd];
        let (cos_a, cos_b) = cos.split_at(half);
        let (sin_a, sin_b) = sin.split_at(half);
        for head in x.chunks_exact_mut(hd) {
            let (first, second) = head.split_at_mut(half);
            for i in 0..half {
                let (a, b) = (first[i], second[i]);
                first[i] = a * cos_a[i] + b * sin_a[i];
                second[i] = b * cos_b[i] + a * sin_b[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_normalise() {
        let x = [1.0, 2.0, 3.0, 6.0, -1.0, 0.5, 0.0, 4.0];
        let mut out = [0.0; 8];
        NormWeights::Rms {
            gamma: vec![1.0; 4],
            eps: 1e-6,
        }
        .forward(&x, &mut out);
        for row in out.chunks(4) {
            let ms: f32 = row.iter().map(|v| v * v).sum::<f32>() / 4.0;
            assert!((ms - 1.0).abs() < 1e-4, "{ms}");
        }
        NormWeights::Layer {
            gamma: vec![1.0; 4],
            beta: vec![0.5; 4],
            eps: 1e-6,
        }
        .forward(&x, &mut out);
        for row in out.chunks(4) {
            let mean: f32 = row.iter().sum::<f32>() / 4.0;
            assert!((mean - 0.5).abs() < 1e-5, "{mean}");
        }
    }

    #[test]
    fn rope_preserves_norms_and_is_identity_at_zero() {
        let tables = RopeTables::new(8, 4, 10_000.0);
        let x = [0.3, -1.0, 0.5, 2.0, 1.0, 0.0, -0.5, 0.25];
        let mut y = x;
        tables.apply(&mut y, 0);
        assert_eq!(x, y);
        tables.apply(&mut y, 5);
        for (a, b) in x.chunks(4).zip(y.chunks(4)) {
            let na: f32 = a.iter().map(|v| v * v).sum();
            let nb: f32 = b.iter().map(|v| v * v).sum();
            assert!((na - nb).abs() < 1e-5);
        }
        assert!(x.iter().zip(&y).any(|(a, b)| (a - b).abs() > 1e-3));
    }

    #[test]
    fn activations_match_their_definitions() {
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!((gelu(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!(gelu(-10.0).abs() < 1e-6);
        let mut out = [0.0; 2];
        swiglu(&[1.0, 0.0, 2.0, 3.0], 2, &mut out);
        assert_eq!(out, [silu(1.0) * 2.0, 0.0]);
    }
}
