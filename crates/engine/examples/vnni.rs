//! Whether an int8 × int8 kernel would pay: the engine's int8 weight-only kernel (weights
//! widened to f32 in registers, f32 FMAs, f32 activations) against a VPDPBUSD kernel
//! (AVX512-VNNI: activations quantized per row to int8 too, weights packed as K-quads, one
//! instruction per 4 × 16 multiply-adds), both on one thread, over a weight set past L3 (28 of
//! 1024²) and one inside it (4 of 256 × 1024). Prints µs per product and the largest difference
//! to the f32 product relative to Σ|x·w|.
//!
//! `cargo run --release -p voxspec-engine --example vnni`

#[cfg(target_arch = "x86_64")]
mod common;

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("VPDPBUSD is an x86-64 instruction");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use voxspec_engine::{Kernel, PackedLinear, WeightFormat};

    use crate::common::{median_time, values};

    const NR: usize = 32;

    /// `[panels][K/4][NR columns][4]` int8 weights, one scale and one column sum per column.
    struct QuadPacked {
        k: usize,
        n: usize,
        w: Vec<i8>,
        scales: Vec<f32>,
        /// `128 · Σ_k q[k][j]`: what the +128 shift of the activations adds.
        shift: Vec<i32>,
    }

    impl QuadPacked {
        fn new(w: &[f32], k: usize, n: usize) -> Self {
            assert!(k.is_multiple_of(4) && n.is_multiple_of(NR));
            let scales: Vec<f32> = (0..n)
                .map(|j| (0..k).map(|kk| w[kk * n + j].abs()).fold(0.0, f32::max) / 127.0)
                .collect();
            let q = |kk: usize, j: usize| -> i8 {
                if scales[j] > 0.0 {
                    (w[kk * n + j] / scales[j]).round().clamp(-127.0, 127.0) as i8
                } else {
                    0
                }
            };
            let mut out = vec![0i8; k * n];
            for p in 0..n / NR {
                for i in 0..k / 4 {
                    for j in 0..NR {
                        for t in 0..4 {
                            out[((p * (k / 4) + i) * NR + j) * 4 + t] = q(4 * i + t, p * NR + j);
                        }
                    }
                }
            }
            let shift = (0..n)
                .map(|j| 128 * (0..k).map(|kk| i32::from(q(kk, j))).sum::<i32>())
                .collect();
            Self {
                k,
                n,
                w: out,
                scales,
                shift,
            }
        }

        /// `y = x · W` for `m ≤ 8` rows, each row quantized with its own scale.
        fn forward(&self, x: &[f32], m: usize, xq: &mut Vec<u32>, y: &mut [f32]) {
            let kq = self.k / 4;
            let mut row_scale = [0.0f32; 8];
            xq.clear();
            for (r, row) in x.chunks_exact(self.k).take(m).enumerate() {
                let max = row.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let s = if max > 0.0 { max / 127.0 } else { 1.0 };
                row_scale[r] = s;
                let inv = 1.0 / s;
                xq.extend(row.chunks_exact(4).map(|c| {
                    let mut v = 0u32;
                    for (t, &x) in c.iter().enumerate() {
                        let q = ((x * inv).round().clamp(-127.0, 127.0) as i32 + 128) as u32;
                        v |= q << (8 * t);
                    }
                    v
                }));
            }
            for p in 0..self.n / NR {
                let w = &self.w[p * self.k * NR..(p + 1) * self.k * NR];
                let mut acc = [[0i32; NR]; 8];
                // SAFETY: checked for avx512vnni in main; sizes by construction.
                unsafe {
                    match m {
                        1 => dp::<1, 2>(xq, kq, w, &mut acc),
                        2 => dp::<2, 2>(xq, kq, w, &mut acc),
                        4 => dp::<4, 1>(xq, kq, w, &mut acc),
                        _ => dp::<8, 1>(xq, kq, w, &mut acc),
                    }
                }
                for (r, acc_r) in acc.iter().enumerate().take(m) {
                    let cols = p * NR..(p + 1) * NR;
                    let y_r = &mut y[r * self.n + p * NR..r * self.n + (p + 1) * NR];
                    for (((yv, &a), &shift), &scale) in y_r
                        .iter_mut()
                        .zip(acc_r)
                        .zip(&self.shift[cols.clone()])
                        .zip(&self.scales[cols])
                    {
                        *yv = (a - shift) as f32 * row_scale[r] * scale;
                    }
                }
            }
        }
    }

    /// # Safety
    /// The CPU must have AVX512-VNNI; `x` holds `MR · kq` quads, `w` `kq · 128` bytes.
    #[target_feature(enable = "avx512f,avx512vnni")]
    unsafe fn dp<const MR: usize, const U: usize>(
        x: &[u32],
        kq: usize,
        w: &[i8],
        out: &mut [[i32; NR]; 8],
    ) {
        use std::arch::x86_64::*;
        let wp = w.as_ptr() as *const __m512i;
        let mut a = [[[_mm512_setzero_si512(); 2]; MR]; U];
        let main = kq - kq % U;
        let mut i = 0;
        while i < main {
            for (u, au) in a.iter_mut().enumerate() {
                // SAFETY: i + u < kq, so 2(i + u) + 1 < w.len() / 64 and r·kq + i + u < x.len().
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(2 * (i + u) + 32) as *const i8);
                    let w0 = _mm512_loadu_si512(wp.add(2 * (i + u)));
                    let w1 = _mm512_loadu_si512(wp.add(2 * (i + u) + 1));
                    for (r, ar) in au.iter_mut().enumerate() {
                        let xv = _mm512_set1_epi32(x[r * kq + i + u] as i32);
                        ar[0] = _mm512_dpbusd_epi32(ar[0], xv, w0);
                        ar[1] = _mm512_dpbusd_epi32(ar[1], xv, w1);
                    }
                }
            }
            i += U;
        }
        for r in 0..MR {
            let (mut s0, mut s1) = (a[0][r][0], a[0][r][1]);
            for au in a.iter().skip(1) {
                s0 = _mm512_add_epi32(s0, au[r][0]);
                s1 = _mm512_add_epi32(s1, au[r][1]);
            }
            // SAFETY: out[r] has 32 i32.
            unsafe {
                _mm512_storeu_si512(out[r].as_mut_ptr() as *mut __m512i, s0);
                _mm512_storeu_si512(out[r].as_mut_ptr().add(16) as *mut __m512i, s1);
            }
        }
    }

    pub fn main() {
        if !is_x86_feature_detected!("avx512vnni") {
            println!("this CPU has no AVX512-VNNI");
            return;
        }
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool");
        one.install(run);
    }

    fn run() {
        println!("one thread; µs per product (GB/s of int8 weights)");
        for (k, n, count) in [(1024usize, 1024usize, 28usize), (256, 1024, 4)] {
            let dense: Vec<Vec<f32>> = (0..count).map(|i| values(k * n, i as u64 + 1)).collect();
            let widen: Vec<PackedLinear> = dense
                .iter()
                .map(|w| {
                    PackedLinear::new(w, k, n, None)
                        .expect("shape")
                        .into_format(WeightFormat::Int8)
                })
                .collect();
            let f32s: Vec<PackedLinear> = dense
                .iter()
                .map(|w| PackedLinear::new(w, k, n, None).expect("shape"))
                .collect();
            let quads: Vec<QuadPacked> = dense.iter().map(|w| QuadPacked::new(w, k, n)).collect();
            println!("\n## K {k} × N {n}, {count} matrices");
            println!("| M | int8 widen (AVX-512) | VPDPBUSD | max err widen | max err dp |");
            println!("|---|---|---|---|---|");
            for m in [1usize, 2, 4, 8] {
                let x = values(m * k, 99);
                let mut y = vec![0.0f32; m * n];
                let mut xq = Vec::new();
                let gbs = |s: f64| {
                    let us = s * 1e6 / count as f64;
                    format!("{us:.0} ({:.1})", (k * n) as f64 / (us * 1e3))
                };
                let t_widen = median_time(15, || {
                    for p in &widen {
                        p.forward_with(Kernel::Avx512, &x, m, &mut y);
                    }
                });
                let t_dp = median_time(15, || {
                    for q in &quads {
                        q.forward(&x, m, &mut xq, &mut y);
                    }
                });
                // Errors on the first matrix, relative to Σ|x·w|.
                let mut want = vec![0.0f32; m * n];
                f32s[0].forward(&x, m, &mut want);
                let err = |got: &[f32]| {
                    let mut worst = 0.0f32;
                    for r in 0..m {
                        for j in 0..n {
                            let s: f32 = (0..k)
                                .map(|kk| (x[r * k + kk] * dense[0][kk * n + j]).abs())
                                .sum();
                            worst = worst.max((got[r * n + j] - want[r * n + j]).abs() / s);
                        }
                    }
                    worst
                };
                let mut y1 = vec![0.0f32; m * n];
                widen[0].forward_with(Kernel::Avx512, &x, m, &mut y1);
                let mut y2 = vec![0.0f32; m * n];
                quads[0].forward(&x, m, &mut xq, &mut y2);
                println!(
                    "| {m} | {} | {} | {:.1e} | {:.1e} |",
                    gbs(t_widen),
                    gbs(t_dp),
                    err(&y1),
                    err(&y2)
                );
            }
        }
    }
}
