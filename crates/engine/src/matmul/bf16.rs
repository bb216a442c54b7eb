//! bf16 weight storage and micro-kernels for [`super::PackedLinear`].
//!
//! A bf16 value is the upper 16 bits of an f32 (sign, the 8 exponent bits, 7 mantissa bits), so
//! widening it back is a 16-bit shift; the conversion at load rounds to nearest, ties to even
//! (relative error ≤ 2⁻⁹). Weights keep the panels of the f32 path (32 columns each), but a
//! panel stores its K rows in pairs: rows `2q` and `2q + 1` share two 64-byte cache lines, line
//! `h` holding columns `16h .. 16h + 16` with the two rows' values of a column side by side:
//!
//! ```text
//! pair q, line h:  u32 lane c = (w[2q][16h + c], w[2q + 1][16h + c])     c = 0 .. 16
//!                  row 2q     = lane << 16           row 2q + 1 = lane & 0xffff_0000
//! ```
//!
//! so one 512-bit load widens into two vectors (a column block of both rows) without a shuffle,
//! and the same lines, read with a 128-byte stride, are the "VNNI" layout of an AMX tile (16
//! pairs × 16 columns; `super::amx`). A panel's K is padded with zero rows to a multiple of
//! [`K_ALIGN`] (a tile's 32 K values); the padding is never read by the widening kernels.
//!
//! The widening kernels run the f32 kernels' FMAs on the widened rows, so the arithmetic (and
//! the activations) stay f32: only the weights are rounded.

use super::{Kernel, NR};

/// A panel's K is padded to a multiple of this (the K extent of an AMX bf16 tile).
pub(crate) const K_ALIGN: usize = 32;

/// A cache line of packed bf16 weights: 16 columns of two consecutive K rows (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub(crate) struct Bf16Row(pub(crate) [u16; NR]);

pub use voxspec_nn::bf16_gemm::{bf16_to_f32, f32_to_bf16};

/// Cache lines per packed panel of a `k`-row weight: `k` rounded up to [`K_ALIGN`].
pub(crate) fn lines_per_panel(k: usize) -> usize {
    k.next_multiple_of(K_ALIGN)
}

/// Packs one f32 panel (`k` rows of [`NR`] values, row-major) into
/// [`lines_per_panel`]`(k)` lines, the padding rows zero.
pub(crate) fn pack_panel(src: &[f32], k: usize) -> impl Iterator<Item = Bf16Row> + '_ {
    let value = move |kk: usize, col: usize| {
        if kk < k {
            f32_to_bf16(src[kk * NR + col])
        } else {
            0
        }
    };
    (0..lines_per_panel(k)).map(move |line| {
        let (q, h) = (line / 2, line % 2);
        let mut row = [0u16; NR];
        for c in 0..NR / 2 {
            row[2 * c] = value(2 * q, 16 * h + c);
            row[2 * c + 1] = value(2 * q + 1, 16 * h + c);
        }
        Bf16Row(row)
    })
}

/// The two f32 weight rows (`2q`, `2q + 1`) of a pair of lines, in column order.
pub(crate) fn unpack_pair(lines: &[Bf16Row]) -> [[f32; NR]; 2] {
    let mut out = [[0.0f32; NR]; 2];
    for (h, line) in lines.iter().take(2).enumerate() {
        for (c, pair) in line.0.chunks_exact(2).enumerate() {
            out[0][16 * h + c] = bf16_to_f32(pair[0]);
            out[1][16 * h + c] = bf16_to_f32(pair[1]);
        }
    }
    out
}

/// The f32 values of a packed panel, `k` rows of [`NR`] (the padding dropped).
pub(crate) fn unpack_panel(lines: &[Bf16Row], k: usize) -> impl Iterator<Item = f32> + '_ {
    lines
        .chunks_exact(2)
        .flat_map(unpack_pair)
        .take(k)
        .flatten()
}

impl Kernel {
    /// [`Kernel::run`] over a bf16 panel (`w`: its lines): `out[r] = Σ_k x[r·k_len + k] · w[k]`
    /// for `rows ≤ max_rows()` rows.
    pub(super) fn run_bf16(
        self,
        rows: usize,
        x: &[f32],
        k_len: usize,
        w: &[Bf16Row],
        out: &mut [[f32; NR]],
    ) {
        debug_assert!(rows <= self.max_rows() && rows <= out.len());
        debug_assert!(x.len() >= rows * k_len && w.len() >= 2 * k_len.div_ceil(2));
        match self.widening() {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: `Avx512` is only chosen when the CPU has AVX-512F (`available`), and
                // the slices hold `rows · k_len` values and the panel's lines (asserted above).
                unsafe {
                    match rows {
                        // One row too takes the AVX-512 kernel (it prefetches; the AVX2 one
                        // does not): in the base preset's one-token step (405 MB of bf16) it
                        // measured as fast per step as two rows, the AVX2 kernel 10-12 % slower
                        // (two interleaved runs, `bench forward --max-k 2`). In isolation, one
                        // 1024² product from memory, AVX2 had measured 131 against 149 µs.
                        1 => x86::panel_avx512::<1, 2>(x, k_len, w, out),
                        2 => x86::panel_avx512::<2, 1>(x, k_len, w, out),
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

fn portable_rows(rows: usize, x: &[f32], k_len: usize, w: &[Bf16Row], out: &mut [[f32; NR]]) {
    match rows {
        1 => panel_portable::<1>(x, k_len, w, out),
        2 => panel_portable::<2>(x, k_len, w, out),
        3 => panel_portable::<3>(x, k_len, w, out),
        _ => panel_portable::<4>(x, k_len, w, out),
    }
}

/// The portable bf16 micro-kernel: widens each pair of lines to two `[f32; NR]` rows, then
/// `MR` rows of f32 accumulators as in the f32 portable kernel.
fn panel_portable<const MR: usize>(x: &[f32], k_len: usize, w: &[Bf16Row], out: &mut [[f32; NR]]) {
    let mut acc = [[0.0f32; NR]; MR];
    for (q, lines) in w.chunks_exact(2).take(k_len.div_ceil(2)).enumerate() {
        let rows = unpack_pair(lines);
        for (j, wr) in rows.iter().enumerate() {
            let k = 2 * q + j;
            if k == k_len {
                break;
            }
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let xv = x[r * k_len + k];
                for (a, &wv) in acc_r.iter_mut().zip(wr) {
                    *a += xv * wv;
                }
            }
        }
    }
    out[..MR].copy_from_slice(&acc);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Bf16Row, NR};

    /// Lines (64 bytes each) prefetched ahead of the loads: 4 KB, as the f32 kernel.
    const PREFETCH: usize = 64;

    /// AVX-512 bf16 micro-kernel: per pair of K rows two 64-byte loads, each widened by a
    /// shift and a mask into one 16-column block of both rows; `MR` rows in `2·MR·U`
    /// accumulators (two FMAs each per pair), pairs unrolled `U` times.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `x` must hold `MR · k_len` values, `w` the panel's
    /// `2·⌈k_len / 2⌉` (or more) lines, `out` at least `MR` rows.
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
        // One pair of K rows (lines `k`, `k + 1` of the panel, x columns `k`, `k + 1`) into one
        // accumulator set.
        let pair = |acc: &mut [[__m512; 2]; MR], k: usize| {
            // SAFETY: the callers pass k + 1 < k_len, so lines k, k + 1 are in the panel and
            // r·k_len + k + 1 < x.len(); lines are 64-byte aligned.
            unsafe {
                let (e0, o0) = widen(_mm512_load_si512(wp.add(k) as *const __m512i));
                let (e1, o1) = widen(_mm512_load_si512(wp.add(k + 1) as *const __m512i));
                for (r, ar) in acc.iter_mut().enumerate() {
                    let x0 = _mm512_set1_ps(*xp.add(r * k_len + k));
                    let x1 = _mm512_set1_ps(*xp.add(r * k_len + k + 1));
                    ar[0] = _mm512_fmadd_ps(x0, e0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(x0, e1, ar[1]);
                    ar[0] = _mm512_fmadd_ps(x1, o0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(x1, o1, ar[1]);
                }
            }
        };
        let pairs = k_len / 2;
        let main = pairs - pairs % U;
        let mut q = 0;
        while q < main {
            for (u, au) in a.iter_mut().enumerate() {
                let k = 2 * (q + u);
                // Past the end of the panel this touches the next panel, which this thread
                // reads next (a prefetch never faults).
                let ahead = wp.wrapping_add(k + PREFETCH);
                _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(1) as *const i8);
                pair(au, k);
            }
            q += U;
        }
        for q in main..pairs {
            pair(&mut a[0], 2 * q);
        }
        if k_len % 2 == 1 {
            // The last row alone: the even half of its pair (the odd half is padding).
            let k = k_len - 1;
            // SAFETY: lines k, k + 1 are the panel's last pair; r·k_len + k < x.len().
            unsafe {
                let (e0, _) = widen(_mm512_load_si512(wp.add(k) as *const __m512i));
                let (e1, _) = widen(_mm512_load_si512(wp.add(k + 1) as *const __m512i));
                for (r, ar) in a[0].iter_mut().enumerate() {
                    let x0 = _mm512_set1_ps(*xp.add(r * k_len + k));
                    ar[0] = _mm512_fmadd_ps(x0, e0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(x0, e1, ar[1]);
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

    /// AVX2 + FMA bf16 micro-kernel: each 32-byte quarter of a pair's two lines widens into
    /// one 8-column block of both rows; `MR` rows in `4·MR` accumulators.
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
        for q in 0..k_len.div_ceil(2) {
            let k = 2 * q;
            let odd = k + 1 < k_len;
            // SAFETY: as in `panel_avx512`; a pair is four aligned 32-byte quarters; the odd
            // row's x is read only when it exists.
            unsafe {
                let mut x0 = [_mm256_setzero_ps(); MR];
                let mut x1 = [_mm256_setzero_ps(); MR];
                for r in 0..MR {
                    x0[r] = _mm256_set1_ps(*xp.add(r * k_len + k));
                    if odd {
                        x1[r] = _mm256_set1_ps(*xp.add(r * k_len + k + 1));
                    }
                }
                for g in 0..4 {
                    let v = _mm256_load_si256(wp.add(4 * q + g));
                    let even = _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
                    let oddw = _mm256_castsi256_ps(_mm256_and_si256(v, high));
                    for ((acc_r, &x0), &x1) in acc.iter_mut().zip(&x0).zip(&x1) {
                        acc_r[g] = _mm256_fmadd_ps(x0, even, acc_r[g]);
                        acc_r[g] = _mm256_fmadd_ps(x1, oddw, acc_r[g]);
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
    fn panels_pack_and_unpack_in_row_and_column_order() {
        for k in [1, 2, 5, 32, 33, 64] {
            let src: Vec<f32> = (0..k * NR).map(|i| (i % 251) as f32).collect();
            let lines: Vec<Bf16Row> = pack_panel(&src, k).collect();
            assert_eq!(lines.len(), k.next_multiple_of(32), "k {k}");
            assert_eq!(unpack_panel(&lines, k).collect::<Vec<_>>(), src, "k {k}");
            // The padding rows are zero.
            let all: Vec<f32> = unpack_panel(&lines, lines.len()).collect();
            assert!(all[k * NR..].iter().all(|&v| v == 0.0), "k {k}");
        }
        // Line 1 of pair 0 holds columns 16..32 of rows 0 and 1, side by side.
        let src: Vec<f32> = (0..2 * NR).map(|i| i as f32).collect();
        let lines: Vec<Bf16Row> = pack_panel(&src, 2).collect();
        assert_eq!(bf16_to_f32(lines[1].0[0]), 16.0);
        assert_eq!(bf16_to_f32(lines[1].0[1]), 48.0);
    }

    /// The portable bf16 kernel against a naive f64 product with the weights rounded to bf16.
    #[test]
    fn portable_bf16_kernel_equals_the_naive_product_of_rounded_weights() {
        for (m, k, n, bias) in [
            (1, 7, 5, false),
            (3, 64, 33, true),
            (17, 40, 96, true),
            (2, 1, 3, false),
        ] {
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
        for (k, n) in [(24, 70), (37, 64), (320, 400), (1024, 1100)] {
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
                    // The tiles carry each activation to 2⁻¹⁷ (amx.rs), ≤ k/4 · 2⁻¹⁶ on these
                    // sums of k products of values in [-1, 1); the widening kernels differ from
                    // the portable one by summation order only.
                    let tol = match kernel {
                        Kernel::Amx => 1e-4 + k as f32 * 4e-7,
                        _ => 1e-4,
                    };
                    assert!(d < tol, "{kernel:?} m {m} k {k} n {n}: {d}");
                }
            }
        }
    }

    /// The tile kernel against a naive f64 product of the f32 activations and the bf16
    /// weights: within 2⁻¹⁵ of `Σ_k |x_k · w_kj|` (the activations' split leaves ≤ 2⁻¹⁷ of
    /// each, f32 accumulation the rest), where rounding the activations to bf16 alone would
    /// leave up to 2⁻⁹ — which the test also checks it would catch.
    #[test]
    fn amx_product_keeps_the_activations_f32() {
        if !Kernel::Amx.supported() {
            eprintln!("no AMX-BF16 on this CPU: nothing to test");
            return;
        }
        let mut worst = 0.0f64;
        for (m, k, n) in [(12, 256, 96), (13, 1024, 64), (16, 96, 70), (33, 512, 40)] {
            let (x, w) = (values(m * k, 21), values(k * n, 22));
            let lin = PackedLinear::new(&w, k, n, None)
                .expect("shapes")
                .into_format(WeightFormat::Bf16);
            let mut got = vec![f32::NAN; m * n];
            lin.forward_with(Kernel::Amx, &x, m, &mut got);
            let wr: Vec<f64> = w
                .iter()
                .map(|&v| f64::from(bf16_to_f32(f32_to_bf16(v))))
                .collect();
            let mut rounded_x_worst = 0.0f64;
            for r in 0..m {
                for j in 0..n {
                    let (mut exact, mut scale, mut rounded_x) = (0.0f64, 0.0f64, 0.0f64);
                    for kk in 0..k {
                        let xv = f64::from(x[r * k + kk]);
                        exact += xv * wr[kk * n + j];
                        scale += (xv * wr[kk * n + j]).abs();
                        rounded_x +=
                            f64::from(bf16_to_f32(f32_to_bf16(x[r * k + kk]))) * wr[kk * n + j];
                    }
                    let ratio = (f64::from(got[r * n + j]) - exact).abs() / scale;
                    worst = worst.max(ratio);
                    rounded_x_worst = rounded_x_worst.max((rounded_x - exact).abs() / scale);
                    assert!(
                        ratio <= 1.0 / 32768.0,
                        "m {m} k {k} n {n} ({r}, {j}): {ratio}"
                    );
                }
            }
            assert!(
                rounded_x_worst > 1.0 / 32768.0,
                "m {m} k {k} n {n}: bf16 activations ({rounded_x_worst:.2e}) would pass too"
            );
        }
        eprintln!("largest |Δ| / Σ|x·w| on the tiles: {worst:.2e}");
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
