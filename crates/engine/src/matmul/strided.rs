//! Register-blocked products over strided, unpacked operands: the two products of attention
//! over the KV cache (`scores = q · kᵀ` with kᵀ `[head_dim, capacity]`, `ctx = p · v` with v
//! `[keys, head_dim]`), which change every step and so cannot be packed at load like weights.
//!
//! `out[r][c] = Σ_k x[r·xs + k] · w[k·ws + c]` for `r < rows ≤ 8` and `c < width ≤ 32`: a block
//! of 32 output columns stays in registers for all `k`, as in the packed kernels, instead of
//! loading and storing a row of scores once per head dimension. Columns past `width` are not
//! read (masked loads) and come out 0.

use super::{Kernel, NR};

impl Kernel {
    /// `out[r][c] = Σ_k x[r·xs + k] · w[k·ws + c]` for `r < rows`, `c < width`; `out[r][c] = 0`
    /// for `width ≤ c < NR`. `rows ≤ 8`, `width ≤ NR`.
    ///
    /// # Panics
    /// When the slices are shorter than the strides and lengths say (an engine bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_strided(
        self,
        rows: usize,
        x: &[f32],
        xs: usize,
        k_len: usize,
        w: &[f32],
        ws: usize,
        width: usize,
        out: &mut [[f32; NR]],
    ) {
        assert!(rows <= 8 && rows <= out.len() && width <= NR);
        if rows == 0 {
            return;
        }
        if k_len == 0 || width == 0 {
            out[..rows].iter_mut().for_each(|o| *o = [0.0; NR]);
            return;
        }
        assert!(
            x.len() >= (rows - 1) * xs + k_len,
            "strided product: x too short"
        );
        assert!(
            w.len() >= (k_len - 1) * ws + width,
            "strided product: w too short"
        );
        match self.widening() {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: `Avx512` is only chosen when the CPU has AVX-512F; the slices hold
                // what the kernel reads (asserted above; it reads only the first `width`
                // columns of each row of `w`).
                unsafe {
                    match rows {
                        1 => x86::strided_avx512::<1, 4>(x, xs, k_len, w, ws, width, out),
                        2 => x86::strided_avx512::<2, 2>(x, xs, k_len, w, ws, width, out),
                        3 => x86::strided_avx512::<3, 1>(x, xs, k_len, w, ws, width, out),
                        4 => x86::strided_avx512::<4, 1>(x, xs, k_len, w, ws, width, out),
                        5 => x86::strided_avx512::<5, 1>(x, xs, k_len, w, ws, width, out),
                        6 => x86::strided_avx512::<6, 1>(x, xs, k_len, w, ws, width, out),
                        7 => x86::strided_avx512::<7, 1>(x, xs, k_len, w, ws, width, out),
                        _ => x86::strided_avx512::<8, 1>(x, xs, k_len, w, ws, width, out),
                    }
                }
            }
            _ => strided_portable(rows, x, xs, k_len, w, ws, width, out),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn strided_portable(
    rows: usize,
    x: &[f32],
    xs: usize,
    k_len: usize,
    w: &[f32],
    ws: usize,
    width: usize,
    out: &mut [[f32; NR]],
) {
    for (r, o) in out[..rows].iter_mut().enumerate() {
        *o = [0.0; NR];
        for k in 0..k_len {
            let xv = x[r * xs + k];
            for (a, &wv) in o[..width].iter_mut().zip(&w[k * ws..k * ws + width]) {
                *a += xv * wv;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::NR;

    /// The lanes of a 16-column half that lie below `width` columns, `half` 0 or 1.
    fn mask(width: usize, half: usize) -> __mmask16 {
        let n = width.saturating_sub(16 * half).min(16);
        ((1u32 << n) - 1) as __mmask16
    }

    /// `MR` rows × 32 columns in `2·MR·U` zmm accumulators, `k` unrolled `U` times with
    /// independent accumulators (one or two rows would otherwise wait on the FMA latency).
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `x` must hold `(MR − 1)·xs + k_len` values and `w`
    /// `(k_len − 1)·ws + width`; `out` at least `MR` rows.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn strided_avx512<const MR: usize, const U: usize>(
        x: &[f32],
        xs: usize,
        k_len: usize,
        w: &[f32],
        ws: usize,
        width: usize,
        out: &mut [[f32; NR]],
    ) {
        let (m0, m1) = (mask(width, 0), mask(width, 1));
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let mut a = [[[_mm512_setzero_ps(); 2]; MR]; U];
        let row = |k: usize| {
            // SAFETY: k < k_len, so row k's first `width` values lie in `w`; the masked loads
            // read nothing past them (a zero mask reads nothing at all).
            unsafe {
                let p = wp.wrapping_add(k * ws);
                (
                    _mm512_maskz_loadu_ps(m0, p),
                    _mm512_maskz_loadu_ps(m1, p.wrapping_add(16)),
                )
            }
        };
        let main = k_len - k_len % U;
        let mut k = 0;
        while k < main {
            for (u, au) in a.iter_mut().enumerate() {
                let (w0, w1) = row(k + u);
                for (r, ar) in au.iter_mut().enumerate() {
                    // SAFETY: r·xs + k + u < (MR − 1)·xs + k_len ≤ x.len().
                    let xv = _mm512_set1_ps(unsafe { *xp.add(r * xs + k + u) });
                    ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
                }
            }
            k += U;
        }
        for k in main..k_len {
            let (w0, w1) = row(k);
            for (r, ar) in a[0].iter_mut().enumerate() {
                // SAFETY: as above.
                let xv = _mm512_set1_ps(unsafe { *xp.add(r * xs + k) });
                ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
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
}

#[cfg(test)]
mod tests {
    use super::super::tests::{max_diff, values};
    use super::*;

    /// Every kernel against a naive product, for every row count, widths below, at and past one
    /// zmm, and strides wider than the width (the last row of `w` ends at `width`, so reading
    /// past it would leave the slice).
    #[test]
    fn strided_products_equal_a_naive_one() {
        for kernel in Kernel::available() {
            for (k_len, xs, ws, width) in [
                (5usize, 7usize, 40usize, 3usize),
                (64, 70, 208, 32),
                (64, 64, 100, 17),
                (33, 40, 64, 16),
                (208, 208, 64, 32),
            ] {
                for rows in 1..=8 {
                    let x = values((rows - 1) * xs + k_len, 11 + rows as u32);
                    let w = values((k_len - 1) * ws + width, 12);
                    let mut got = [[f32::NAN; NR]; 8];
                    kernel.run_strided(rows, &x, xs, k_len, &w, ws, width, &mut got);
                    for r in 0..rows {
                        let want: Vec<f32> = (0..NR)
                            .map(|c| {
                                if c >= width {
                                    return 0.0;
                                }
                                (0..k_len)
                                    .map(|k| f64::from(x[r * xs + k]) * f64::from(w[k * ws + c]))
                                    .sum::<f64>() as f32
                            })
                            .collect();
                        let d = max_diff(&got[r], &want);
                        assert!(
                            d < 1e-4,
                            "{kernel:?} rows {rows} k {k_len} width {width} row {r}: {d}"
                        );
                    }
                }
            }
        }
    }
}
