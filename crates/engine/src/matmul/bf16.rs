//! bf16 weight storage and micro-kernels for [`super::PackedLinear`].
//!
//! A bf16 value is the upper 16 bits of an f32 (sign, the 8 exponent bits, 7 mantissa bits), so
//! widening it back is a 16-bit shift; the conversion at load rounds to nearest, ties to even
//! (relative error ≤ 2⁻⁹). Weights keep the panel layout of the f32 path, `[panels][K][NR]`,
//! one 64-byte cache line per panel row, with the 32 columns of a row interleaved so that one
//! 512-bit load widens into two vectors without a cross-lane shuffle:
//!
//! ```text
//! u16 index:   0    1    2    3   …  30   31        as 16 u32 lanes: lane i = (col i, col 16+i)
//! column:      0   16    1   17   …  15   31        col  0..16 = lane << 16
//!                                                   col 16..32 = lane & 0xffff_0000
//! ```
//!
//! The kernels widen each row to f32 in registers and run the f32 kernels' FMAs, so the
//! arithmetic (and the activations) stay f32: only the weights are rounded.

use super::{Kernel, NR};

/// A packed panel row of bf16 weights: one cache line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Bf16Row(pub(crate) [u16; NR]);

/// `v` rounded to bf16 (nearest, ties to even); NaN stays a (quiet) NaN, ±∞ stays ±∞, and
/// finite values past bf16's largest round to ±∞ as IEEE rounding does.
pub fn f32_to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let lsb = (bits >> 16) & 1;
    (bits.wrapping_add(0x7fff + lsb) >> 16) as u16
}

/// The f32 a bf16 value stands for (exact).
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// Packs one panel row (`cols ≤ NR` values, the rest zero) in the interleaved order.
pub(crate) fn pack_row(src: &[f32]) -> Bf16Row {
    let mut row = [0u16; NR];
    for (j, &v) in src.iter().enumerate().take(NR) {
        row[interleaved(j)] = f32_to_bf16(v);
    }
    Bf16Row(row)
}

/// The f32 values of one packed row, in column order.
pub(crate) fn unpack_row(row: &Bf16Row) -> [f32; NR] {
    let mut out = [0.0f32; NR];
    for (i, pair) in row.0.chunks_exact(2).enumerate() {
        out[i] = bf16_to_f32(pair[0]);
        out[i + NR / 2] = bf16_to_f32(pair[1]);
    }
    out
}

/// Where column `j` of a panel row sits in the packed row.
fn interleaved(j: usize) -> usize {
    if j < NR / 2 {
        2 * j
    } else {
        2 * (j - NR / 2) + 1
    }
}

impl Kernel {
    /// [`Kernel::run`] over bf16 weights: `out[r] = Σ_k x[r·k_len + k] · w[k]` for
    /// `rows ≤ max_rows()` rows.
    pub(super) fn run_bf16(
        self,
        rows: usize,
        x: &[f32],
        k_len: usize,
        w: &[Bf16Row],
        out: &mut [[f32; NR]],
    ) {
        debug_assert!(rows <= self.max_rows() && rows <= out.len());
        debug_assert!(x.len() >= rows * k_len && w.len() >= k_len);
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: `Avx512` is only chosen when the CPU has AVX-512F (`available`), and
                // the slices hold `rows · k_len` values and `k_len` rows (asserted above).
                unsafe {
                    match rows {
                        // One row too takes the AVX-512 kernel (it prefetches; the AVX2 one
                        // does not): in the base preset's one-token step (405 MB of bf16) it
                        // measured as fast per step as two rows, the AVX2 kernel 10-12 % slower
                        // (two interleaved runs, `bench forward --max-k 2`). In isolation, one
                        // 1024² product from memory, AVX2 had measured 131 against 149 µs.
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
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx512 | Kernel::Avx2 => portable_rows(rows, x, k_len, w, out),
            Kernel::Portable => portable_rows(rows, x, k_len, w, out),
        }
    }
}

fn portable_rows(rows: usize, x: &[f32], k_len: usize, w: &[Bf16Row], out: &mut [[f32; NR]]) {
    match rows {
        1 => panel_portable::<1>(x, k_len, w, out),
        2 => panel_portable::<2>(x, k_len, w, out),
        3 => panel_portable::<3>(x, k_len, w, out),
        _ => panel_portable::<4>(x, k_len, w, out),
    }
}

/// The portable bf16 micro-kernel: widens each row to `[f32; NR]`, then `MR` rows of f32
/// accumulators as in the f32 portable kernel.
fn panel_portable<const MR: usize>(x: &[f32], k_len: usize, w: &[Bf16Row], out: &mut [[f32; NR]]) {
    let mut acc = [[0.0f32; NR]; MR];
    for (k, row) in w.iter().take(k_len).enumerate() {
        let wr = unpack_row(row);
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

    use super::{Bf16Row, NR};

    /// Panel rows (64 bytes each) prefetched ahead of the loads: 4 KB, as the f32 kernel.
    const PREFETCH: usize = 64;

    /// AVX-512 bf16 micro-kernel: per panel row one 64-byte load, a shift and a mask widen the
    /// 32 weights into two zmm of f32 (columns 0..16 and 16..32); then as the f32 kernel, `MR`
    /// rows in `2·MR·U` accumulators, K unrolled `U` times.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `x` must hold `MR · k_len` values, `w` `k_len` rows,
    /// `out` at least `MR` rows.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panel_avx512<const MR: usize, const U: usize>(
        x: &[f32],
        k_len: usize,
        w: &[Bf16Row],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let high = _mm512_set1_epi32(0xffff_0000_u32 as i32);
        let mut a = [[[_mm512_setzero_ps(); 2]; MR]; U];
        let widen = |v: __m512i| {
            (
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v)),
                _mm512_castsi512_ps(_mm512_and_si512(v, high)),
            )
        };
        let main = k_len - k_len % U;
        let mut k = 0;
        while k < main {
            for (u, au) in a.iter_mut().enumerate() {
                // SAFETY: k + u < k_len ≤ w.len(), r·k_len + k + u < x.len(); rows are 64-byte
                // aligned.
                unsafe {
                    // Past the end of the panel this touches the next panel, which this thread
                    // reads next.
                    let ahead = wp.wrapping_add(k + u + PREFETCH);
                    _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                    let (w0, w1) = widen(_mm512_load_si512(wp.add(k + u) as *const __m512i));
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
                let (w0, w1) = widen(_mm512_load_si512(wp.add(k) as *const __m512i));
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

    /// AVX2 + FMA bf16 micro-kernel: each 32-byte half of a panel row widens into two ymm
    /// (the first half: columns 0..8 and 16..24, the second: 8..16 and 24..32); `MR` rows in
    /// `4·MR` accumulators.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; sizes as for [`panel_avx512`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_avx2<const MR: usize>(
        x: &[f32],
        k_len: usize,
        w: &[Bf16Row],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr() as *const __m256i;
        let high = _mm256_set1_epi32(0xffff_0000_u32 as i32);
        let mut acc = [[_mm256_setzero_ps(); 4]; MR];
        for k in 0..k_len {
            // SAFETY: as in `panel_avx512`; a row is two aligned 32-byte halves.
            unsafe {
                let mut xv = [_mm256_setzero_ps(); MR];
                for (r, x) in xv.iter_mut().enumerate() {
                    *x = _mm256_set1_ps(*xp.add(r * k_len + k));
                }
                for half in 0..2 {
                    let v = _mm256_load_si256(wp.add(2 * k + half));
                    let lo = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
                    let hi = _mm256_castsi256_ps(_mm256_and_si256(v, high));
                    for (acc_r, &x) in acc.iter_mut().zip(&xv) {
                        acc_r[half] = _mm256_fmadd_ps(x, lo, acc_r[half]);
                        acc_r[2 + half] = _mm256_fmadd_ps(x, hi, acc_r[2 + half]);
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

    #[test]
    fn rounding_is_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(-2.0), 0xc000);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        // 1 + 2⁻⁸ is halfway between 1 and 1 + 2⁻⁷: ties to the even 1.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        // 1 + 3·2⁻⁸ is halfway between 1 + 2⁻⁷ (odd) and 1 + 2·2⁻⁷: ties to the even one.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        // Just past halfway rounds up, just below rounds down.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_7fff)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80, "past bf16's largest: ∞");
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        for v in values(10_000, 9) {
            let r = bf16_to_f32(f32_to_bf16(v * 100.0));
            assert!((r - v * 100.0).abs() <= (v * 100.0).abs() / 256.0, "{v}");
        }
    }

    #[test]
    fn rows_pack_and_unpack_in_column_order() {
        let src: Vec<f32> = (0..NR).map(|j| j as f32).collect();
        assert_eq!(unpack_row(&pack_row(&src)).to_vec(), src);
        let short = pack_row(&src[..5]);
        assert_eq!(unpack_row(&short)[..6], [0.0, 1.0, 2.0, 3.0, 4.0, 0.0]);
    }

    /// The portable bf16 kernel against a naive f64 product with the weights rounded to bf16.
    #[test]
    fn portable_bf16_kernel_equals_the_naive_product_of_rounded_weights() {
        for (m, k, n, bias) in [(1, 7, 5, false), (3, 64, 33, true), (17, 40, 96, true)] {
            let (x, w, b) = (values(m * k, 1), values(k * n, 2), values(n, 3));
            let b = bias.then_some(b);
            let rounded: Vec<f32> = w.iter().map(|&v| bf16_to_f32(f32_to_bf16(v))).collect();
            let lin = PackedLinear::new(&w, k, n, b.clone())
                .expect("shapes")
                .into_format(WeightFormat::Bf16);
            let mut y = vec![f32::NAN; m * n];
            lin.forward_with(Kernel::Portable, &x, m, &mut y);
            let d = max_diff(&y, &naive(&x, &rounded, b.as_deref(), m, k, n));
            assert!(d < 1e-5, "m {m} k {k} n {n}: {d}");
        }
    }

    /// Every SIMD bf16 kernel this CPU has against the portable bf16 one: every row count up
    /// to past two chunks, a ragged last panel, the one-thread and the split path.
    #[test]
    fn simd_bf16_kernels_equal_the_portable_one() {
        for (k, n) in [(24, 70), (320, 400), (1024, 1100)] {
            let w = values(k * n, 4);
            let lin = PackedLinear::new(&w, k, n, Some(values(n, 5)))
                .expect("shapes")
                .into_format(WeightFormat::Bf16);
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

    /// The bf16 product against the f32 one. Rounding each weight to bf16 changes it by at
    /// most 2⁻⁹ of its magnitude, so `|y_bf16 − y_f32| ≤ 2⁻⁹ · Σ_k |x_k · w_kj|` (plus f32
    /// summation error); the test allows 2⁻⁸ of that sum and reports the largest ratio seen.
    #[test]
    fn bf16_product_is_within_the_rounding_bound_of_the_f32_product() {
        let mut worst = 0.0f32;
        for (m, k, n) in [(1, 1024, 96), (4, 256, 200), (9, 4096, 64)] {
            let (x, w) = (values(m * k, 7), values(k * n, 8));
            let f32_lin = PackedLinear::new(&w, k, n, None).expect("shapes");
            let bf16_lin = f32_lin.clone().into_format(WeightFormat::Bf16);
            let (mut want, mut got) = (vec![0.0; m * n], vec![0.0; m * n]);
            f32_lin.forward(&x, m, &mut want);
            bf16_lin.forward(&x, m, &mut got);
            for r in 0..m {
                for j in 0..n {
                    let scale: f32 = (0..k).map(|kk| (x[r * k + kk] * w[kk * n + j]).abs()).sum();
                    let ratio = (got[r * n + j] - want[r * n + j]).abs() / scale;
                    worst = worst.max(ratio);
                    assert!(
                        ratio <= 1.0 / 256.0,
                        "m {m} k {k} n {n} ({r}, {j}): {ratio}"
                    );
                }
            }
        }
        eprintln!(
            "largest |Δ| / Σ|x·w|: {worst:.2e} (bound 2⁻⁹ = {:.2e})",
            1.0 / 512.0
        );
    }

    #[test]
    fn formats_convert_and_halve_the_bytes_read() {
        let (k, n) = (40, 70);
        let w = values(k * n, 11);
        let f = PackedLinear::new(&w, k, n, Some(values(n, 12))).expect("shapes");
        let b = f.clone().into_format(WeightFormat::Bf16);
        assert_eq!(
            (f.format(), b.format()),
            (WeightFormat::F32, WeightFormat::Bf16)
        );
        assert_eq!(f.weight_bytes(), 4 * (k * n + n));
        assert_eq!(b.weight_bytes(), 2 * k * n + 4 * n);
        // Back to f32: the bf16-rounded weights, exactly.
        let back = b.clone().into_format(WeightFormat::F32);
        let rounded: Vec<f32> = w.iter().map(|&v| bf16_to_f32(f32_to_bf16(v))).collect();
        let direct = PackedLinear::new(&rounded, k, n, Some(values(n, 12))).expect("shapes");
        let x = values(3 * k, 13);
        let (mut y1, mut y2, mut y3) = (vec![0.0; 3 * n], vec![0.0; 3 * n], vec![0.0; 3 * n]);
        back.forward_with(Kernel::Portable, &x, 3, &mut y1);
        direct.forward_with(Kernel::Portable, &x, 3, &mut y2);
        b.forward_with(Kernel::Portable, &x, 3, &mut y3);
        assert_eq!(y1, y2);
        assert!(max_diff(&y1, &y3) < 1e-5);
    }
}
