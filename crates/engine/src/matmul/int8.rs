//! int8 weight-only storage and micro-kernels for [`super::PackedLinear`].
//!
//! Each output column `j` of a weight gets one f32 scale, `s_j = max_k |W[k, j]| / 127`, and its
//! weights are stored as `q = round(W / s_j)` in `[-127, 127]` (symmetric, no zero point; a
//! column of zeros gets scale 0). A product is then exact up to that rounding:
//! `y_j = s_j · Σ_k x_k · q_kj`, so the kernels sum `x · q` in f32 and the scale is applied once
//! per output, with the bias ([`super::PackedLinear`]'s panel loop). Rounding changes a weight by
//! at most `s_j / 2`, so `|Δy_j| ≤ (max_k |W[k, j]| / 254) · Σ_k |x_k|`.
//!
//! Weights keep the panel layout of the f32 path, `[panels][K][NR]`, a panel row of 32 columns in
//! 32 bytes (half a cache line) in column order: the kernels sign-extend 16 bytes at a time to
//! 16 i32 lanes and convert them to f32 in registers, then run the f32 kernels' FMAs. Activations
//! and arithmetic stay f32: a quarter of the f32 bytes per step, weight-only.

use super::{Kernel, NR};

/// A packed panel row of int8 weights (32 columns, half a cache line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(32))]
pub(crate) struct I8Row(pub(crate) [i8; NR]);

/// int8 weights of a packed layer: `rows` `[panels · K]` in panel order and one scale per
/// column, `[panels · NR]` (the padding columns of the last panel have scale 0).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Int8Weights {
    pub(crate) rows: Vec<I8Row>,
    pub(crate) scales: Vec<f32>,
}

/// Quantizes packed f32 weights (`[panels][k][NR]`) column by column.
pub(crate) fn quantize(w: &[f32], k: usize) -> Int8Weights {
    let panels = w.len() / (k * NR);
    let mut rows = Vec::with_capacity(panels * k);
    let mut scales = Vec::with_capacity(panels * NR);
    for panel in w.chunks_exact(k * NR) {
        let mut max = [0.0f32; NR];
        for row in panel.chunks_exact(NR) {
            for (m, &v) in max.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
        let scale = max.map(|m| m / 127.0);
        let inverse = scale.map(|s| if s > 0.0 { 1.0 / s } else { 0.0 });
        for row in panel.chunks_exact(NR) {
            let mut q = [0i8; NR];
            for ((q, &v), &inv) in q.iter_mut().zip(row).zip(&inverse) {
                *q = (v * inv).round().clamp(-127.0, 127.0) as i8;
            }
            rows.push(I8Row(q));
        }
        scales.extend_from_slice(&scale);
    }
    Int8Weights { rows, scales }
}

/// The f32 values the int8 weights stand for, packed `[panels][k][NR]`.
pub(crate) fn dequantize(w: &Int8Weights, k: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(w.rows.len() * NR);
    for (panel, scale) in w.rows.chunks_exact(k).zip(w.scales.chunks_exact(NR)) {
        for row in panel {
            out.extend(row.0.iter().zip(scale).map(|(&q, &s)| f32::from(q) * s));
        }
    }
    out
}

impl Kernel {
    /// [`Kernel::run`] over int8 weights, unscaled: `out[r] = Σ_k x[r·k_len + k] · q[k]` for
    /// `rows ≤ max_rows()` rows.
    pub(super) fn run_int8(
        self,
        rows: usize,
        x: &[f32],
        k_len: usize,
        w: &[I8Row],
        out: &mut [[f32; NR]],
    ) {
        debug_assert!(rows <= self.max_rows() && rows <= out.len());
        debug_assert!(x.len() >= rows * k_len && w.len() >= k_len);
        match self.widening() {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: `Avx512` is only chosen when the CPU has AVX-512F (`available`), and
                // the slices hold `rows · k_len` values and `k_len` rows (asserted above).
                unsafe {
                    match rows {
                        1 => x86::panel_avx512::<1, 4>(x, k_len, w, out),
                        2 => x86::panel_avx512::<2, 2>(x, k_len, w, out),
                        3 => x86::panel_avx512::<3, 1>(x, k_len, w, out),
                        4 => x86::panel_avx512::<4, 1>(x, k_len, w, out),
                        5 => x86::panel_avx512::<5, 1>(x, k_len, w, out),
                        6 => x86::panel_avx512::<6, 1>(x, k_len, w, out),
                        7 => x86::panel_avx512::<7, 1>(x, k_len, w, out),
                        _ => x86::panel_avx512::<8, 1>(x, k_len, w, out),
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                // SAFETY: `Avx2` is only chosen when the CPU has AVX2 and FMA; sizes as above.
                unsafe {
                    match rows {
                        1 => x86::panel_avx2::<1>(x, k_len, w, out),
                        2 => x86::panel_avx2::<2>(x, k_len, w, out),
                        _ => x86::panel_avx2::<3>(x, k_len, w, out),
                    }
                }
            }
            _ => portable_rows(rows, x, k_len, w, out),
        }
    }
}

fn portable_rows(rows: usize, x: &[f32], k_len: usize, w: &[I8Row], out: &mut [[f32; NR]]) {
    match rows {
        1 => panel_portable::<1>(x, k_len, w, out),
        2 => panel_portable::<2>(x, k_len, w, out),
        3 => panel_portable::<3>(x, k_len, w, out),
        _ => panel_portable::<4>(x, k_len, w, out),
    }
}

/// The portable int8 micro-kernel: widens each row to `[f32; NR]`, then `MR` rows of f32
/// accumulators as in the f32 portable kernel.
fn panel_portable<const MR: usize>(x: &[f32], k_len: usize, w: &[I8Row], out: &mut [[f32; NR]]) {
    let mut acc = [[0.0f32; NR]; MR];
    for (k, row) in w.iter().take(k_len).enumerate() {
        let wr = row.0.map(f32::from);
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let xv = x[r * k_len + k];
            for (a, &wv) in acc_r.iter_mut().zip(&wr) {
                *a += xv * wv;
            }
        }
    }
    out[..MR].copy_from_slice(&acc);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{I8Row, NR};

    /// Panel rows (32 bytes each) prefetched ahead of the loads: 4 KB, as the f32 kernel.
    const PREFETCH: usize = 128;

    /// AVX-512 int8 micro-kernel: per panel row two 16-byte loads sign-extend and convert into
    /// two zmm of f32 (columns 0..16 and 16..32); then as the f32 kernel, `MR` rows in
    /// `2·MR·U` accumulators, K unrolled `U` times.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `x` must hold `MR · k_len` values, `w` `k_len` rows,
    /// `out` at least `MR` rows.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panel_avx512<const MR: usize, const U: usize>(
        x: &[f32],
        k_len: usize,
        w: &[I8Row],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let mut a = [[[_mm512_setzero_ps(); 2]; MR]; U];
        // SAFETY (for the callers below): `row` points to one 32-byte-aligned I8Row.
        let widen = |row: *const I8Row| unsafe {
            let p = row as *const __m128i;
            (
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(p))),
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(p.add(1)))),
            )
        };
        let main = k_len - k_len % U;
        let mut k = 0;
        while k < main {
            for (u, au) in a.iter_mut().enumerate() {
                // SAFETY: k + u < k_len ≤ w.len(), r·k_len + k + u < x.len(); rows are 32-byte
                // aligned.
                unsafe {
                    // One prefetch per cache line (two rows); past the end of the panel it
                    // touches the next panel, which this thread reads next.
                    if (k + u) % 2 == 0 {
                        let ahead = wp.wrapping_add(k + u + PREFETCH);
                        _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                    }
                    let (w0, w1) = widen(wp.add(k + u));
                    for (r, ar) in au.iter_mut().enumerate() {
                        let xv = _mm512_set1_ps(*xp.add(r * k_len + k + u));
                        ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                        ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
                    }
                }
            }
            k += U;
        }
        for k in main..k_len {
            // SAFETY: as above.
            unsafe {
                let (w0, w1) = widen(wp.add(k));
                for (r, ar) in a[0].iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*xp.add(r * k_len + k));
                    ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
                }
            }
        }
        for r in 0..MR {
            let (mut s0, mut s1) = (a[0][r][0], a[0][r][1]);
            for au in a.iter().skip(1) {
                s0 = _mm512_add_ps(s0, au[r][0]);
                s1 = _mm512_add_ps(s1, au[r][1]);
            }
            // SAFETY: out[r] has NR = 32 floats.
            unsafe {
                _mm512_storeu_ps(out[r].as_mut_ptr(), s0);
                _mm512_storeu_ps(out[r].as_mut_ptr().add(16), s1);
            }
        }
    }

    /// AVX2 + FMA int8 micro-kernel: each 8-byte quarter of a panel row sign-extends and
    /// converts into one ymm of f32; `MR` rows in `4·MR` accumulators.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; sizes as for [`panel_avx512`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_avx2<const MR: usize>(
        x: &[f32],
        k_len: usize,
        w: &[I8Row],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr() as *const i64;
        let mut acc = [[_mm256_setzero_ps(); 4]; MR];
        for k in 0..k_len {
            // SAFETY: as in `panel_avx512`; a row is four 8-byte quarters.
            unsafe {
                let mut xv = [_mm256_setzero_ps(); MR];
                for (r, x) in xv.iter_mut().enumerate() {
                    *x = _mm256_set1_ps(*xp.add(r * k_len + k));
                }
                for j in 0..4 {
                    let q = _mm_loadl_epi64(wp.add(4 * k + j) as *const __m128i);
                    let wv = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
                    for (acc_r, &x) in acc.iter_mut().zip(&xv) {
                        acc_r[j] = _mm256_fmadd_ps(x, wv, acc_r[j]);
                    }
                }
            }
        }
        for (acc_r, out_r) in acc.iter().zip(out.iter_mut()) {
            for (j, &a) in acc_r.iter().enumerate() {
                // SAFETY: out_r has NR = 32 floats, j < 4.
                unsafe { _mm256_storeu_ps(out_r.as_mut_ptr().add(8 * j), a) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{PackedLinear, WeightFormat};
    use super::*;
    use crate::matmul::tests::{max_diff, naive, values};

    /// The dense `[k, n]` weights an int8 layer stands for.
    fn dequantized_dense(w: &[f32], k: usize, n: usize) -> Vec<f32> {
        let lin = PackedLinear::new(w, k, n, None)
            .expect("shapes")
            .into_format(WeightFormat::Int8)
            .into_format(WeightFormat::F32);
        // Read the dense matrix back through products with unit rows.
        let mut dense = vec![0.0f32; k * n];
        let eye: Vec<f32> = (0..k * k)
            .map(|i| if i / k == i % k { 1.0 } else { 0.0 })
            .collect();
        lin.forward_with(Kernel::Portable, &eye, k, &mut dense);
        dense
    }

    #[test]
    fn quantization_is_per_column_and_within_half_a_step() {
        let (k, n) = (37, 45);
        let mut w = values(k * n, 21);
        // A zero column and a column with one large weight.
        for kk in 0..k {
            w[kk * n + 3] = 0.0;
        }
        w[5 * n + 7] = 40.0;
        let dense = dequantized_dense(&w, k, n);
        for j in 0..n {
            let max = (0..k).map(|kk| w[kk * n + j].abs()).fold(0.0f32, f32::max);
            for kk in 0..k {
                let (orig, got) = (w[kk * n + j], dense[kk * n + j]);
                assert!(
                    (orig - got).abs() <= max / 254.0 * 1.0001 + 1e-12,
                    "({kk}, {j}): {orig} → {got} (column max {max})"
                );
            }
        }
        assert!((0..k).all(|kk| dense[kk * n + 3] == 0.0), "zero column");
        assert!(
            (dense[5 * n + 7] - 40.0).abs() < 1e-4,
            "the column's largest weight is kept"
        );
    }

    /// The portable int8 kernel against a naive f64 product with the dequantized weights.
    #[test]
    fn portable_int8_kernel_equals_the_naive_product_of_dequantized_weights() {
        for (m, k, n, bias) in [(1, 7, 5, false), (3, 64, 33, true), (17, 40, 96, true)] {
            let (x, w, b) = (values(m * k, 1), values(k * n, 2), values(n, 3));
            let b = bias.then_some(b);
            let dense = dequantized_dense(&w, k, n);
            let lin = PackedLinear::new(&w, k, n, b.clone())
                .expect("shapes")
                .into_format(WeightFormat::Int8);
            let mut y = vec![f32::NAN; m * n];
            lin.forward_with(Kernel::Portable, &x, m, &mut y);
            let d = max_diff(&y, &naive(&x, &dense, b.as_deref(), m, k, n));
            assert!(d < 1e-5, "m {m} k {k} n {n}: {d}");
        }
    }

    /// Every SIMD int8 kernel this CPU has against the portable int8 one: every row count up
    /// to past two chunks, a ragged last panel, the one-thread and the split path.
    #[test]
    fn simd_int8_kernels_equal_the_portable_one() {
        for (k, n) in [(24, 70), (320, 400), (1024, 1100)] {
            let w = values(k * n, 4);
            let lin = PackedLinear::new(&w, k, n, Some(values(n, 5)))
                .expect("shapes")
                .into_format(WeightFormat::Int8);
            for m in 1..=17 {
                let x = values(m * k, 6 + m as u32);
                let mut want = vec![0.0; m * n];
                lin.forward_with(Kernel::Portable, &x, m, &mut want);
                for kernel in Kernel::available() {
                    let mut got = vec![f32::NAN; m * n];
                    lin.forward_with(kernel, &x, m, &mut got);
                    let d = max_diff(&got, &want);
                    assert!(d < 1e-4, "{kernel:?} m {m} k {k} n {n}: {d}");
                }
            }
        }
    }

    /// The int8 product against the f32 one: `|Δy_j| ≤ (max_k |W[k, j]| / 254) · Σ_k |x_k|`
    /// (plus f32 summation error); the test allows 1.01 times that bound.
    #[test]
    fn int8_product_is_within_the_rounding_bound_of_the_f32_product() {
        let mut worst = 0.0f32;
        for (m, k, n) in [(1, 1024, 96), (4, 256, 200), (9, 4096, 64)] {
            let (x, w) = (values(m * k, 7), values(k * n, 8));
            let f32_lin = PackedLinear::new(&w, k, n, None).expect("shapes");
            let int8_lin = f32_lin.clone().into_format(WeightFormat::Int8);
            let (mut want, mut got) = (vec![0.0; m * n], vec![0.0; m * n]);
            f32_lin.forward(&x, m, &mut want);
            int8_lin.forward(&x, m, &mut got);
            for r in 0..m {
                let l1: f32 = x[r * k..(r + 1) * k].iter().map(|v| v.abs()).sum();
                for j in 0..n {
                    let max = (0..k).map(|kk| w[kk * n + j].abs()).fold(0.0f32, f32::max);
                    let bound = max / 254.0 * l1;
                    let ratio = (got[r * n + j] - want[r * n + j]).abs() / bound;
                    worst = worst.max(ratio);
                    assert!(ratio <= 1.01, "m {m} k {k} n {n} ({r}, {j}): {ratio}");
                }
            }
        }
        eprintln!("largest |Δ| / bound: {worst:.3}");
    }

    #[test]
    fn formats_convert_and_quarter_the_bytes_read() {
        let (k, n) = (40, 70);
        let w = values(k * n, 11);
        let f = PackedLinear::new(&w, k, n, Some(values(n, 12))).expect("shapes");
        let q = f.clone().into_format(WeightFormat::Int8);
        assert_eq!(q.format(), WeightFormat::Int8);
        // One byte per weight, f32 bias and scales.
        assert_eq!(q.weight_bytes(), k * n + 4 * n + 4 * n);
        // int8 → f32 → int8 keeps the same weights, and bf16 → int8 goes through f32.
        let again = q.clone().into_format(WeightFormat::F32);
        let requantized = again.clone().into_format(WeightFormat::Int8);
        let x = values(3 * k, 13);
        let (mut y1, mut y2, mut y3) = (vec![0.0; 3 * n], vec![0.0; 3 * n], vec![0.0; 3 * n]);
        q.forward_with(Kernel::Portable, &x, 3, &mut y1);
        requantized.forward_with(Kernel::Portable, &x, 3, &mut y2);
        again.forward_with(Kernel::Portable, &x, 3, &mut y3);
        assert!(max_diff(&y1, &y2) < 1e-5);
        assert!(max_diff(&y1, &y3) < 1e-5);
        let via_bf16 = f
            .into_format(WeightFormat::Bf16)
            .into_format(WeightFormat::Int8);
        assert_eq!(via_bf16.format(), WeightFormat::Int8);
        via_bf16.forward_with(Kernel::Portable, &x, 3, &mut y2);
        // The bf16 detour moves a weight by ≤ 2⁻⁹ of itself: the outputs stay close.
        assert!(max_diff(&y1, &y2) < 0.05, "{}", max_diff(&y1, &y2));
    }
}
