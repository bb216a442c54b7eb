//! Which bf16 kernel to ship: the engine's widening kernel (bf16 weights widened to f32 in
//! registers, f32 FMAs, f32 activations) against a VDPBF16PS kernel (AVX512-BF16: activations
//! rounded to bf16 too, weights packed as K-pairs, one instruction per 2 × 16 products), both
//! on one thread (the kernels, not the threading), over a weight set past L3 (28 of 1024²) and
//! one inside it (4 of 256 × 1024). Prints µs per product and the largest difference to the
//! f32 product relative to Σ|x·w|.
//!
//! `cargo run --release -p voxspec-engine --example dpbf16`

#[cfg(target_arch = "x86_64")]
mod common;

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    println!("VDPBF16PS is an x86-64 instruction");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use voxspec_engine::{Kernel, PackedLinear, WeightFormat};

    use crate::common::{median_time, values};

    const NR: usize = 32;

    fn bf16(v: f32) -> u16 {
        voxspec_engine::matmul::bf16::f32_to_bf16(v)
    }

    /// `[panels][K/2][2 × 16 columns][pair]`: for K-rows (2i, 2i + 1) and column j, the two
    /// weights adjacent (the pair VDPBF16PS multiplies with the pair of activations).
    struct PairPacked {
        k: usize,
        n: usize,
        w: Vec<u16>,
    }

    impl PairPacked {
        fn new(w: &[f32], k: usize, n: usize) -> Self {
            assert!(k.is_multiple_of(2) && n.is_multiple_of(NR));
            let panels = n / NR;
            let mut out = vec![0u16; panels * k * NR];
            for p in 0..panels {
                for kp in 0..k / 2 {
                    for j in 0..NR {
                        let at = ((p * (k / 2) + kp) * NR + j) * 2;
                        out[at] = bf16(w[(2 * kp) * n + p * NR + j]);
                        out[at + 1] = bf16(w[(2 * kp + 1) * n + p * NR + j]);
                    }
                }
            }
            Self { k, n, w: out }
        }

        /// `y = x · W` for `m ≤ 8` rows.
        fn forward(&self, x: &[f32], m: usize, y: &mut [f32]) {
            // Activations as bf16 pairs (one u32 per K-pair).
            let xp: Vec<u32> = (0..m * self.k / 2)
                .map(|i| u32::from(bf16(x[2 * i])) | (u32::from(bf16(x[2 * i + 1])) << 16))
                .collect();
            for p in 0..self.n / NR {
                let w = &self.w[p * self.k * NR..(p + 1) * self.k * NR];
                let mut acc = [[0.0f32; NR]; 8];
                // SAFETY: checked for avx512bf16 in main; sizes by construction.
                unsafe {
                    match m {
                        1 => dp::<1>(&xp, self.k / 2, w, &mut acc),
                        2 => dp::<2>(&xp, self.k / 2, w, &mut acc),
                        4 => dp::<4>(&xp, self.k / 2, w, &mut acc),
                        _ => dp::<8>(&xp, self.k / 2, w, &mut acc),
                    }
                }
                for r in 0..m {
                    y[r * self.n + p * NR..r * self.n + p * NR + NR].copy_from_slice(&acc[r]);
                }
            }
        }
    }

    /// # Safety
    /// The CPU must have AVX512-BF16; `x` holds `MR · kp` pairs, `w` `kp · 64` values.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn dp<const MR: usize>(x: &[u32], kp: usize, w: &[u16], out: &mut [[f32; NR]; 8]) {
        use std::arch::x86_64::*;
        let wp = w.as_ptr() as *const __m512i;
        let mut a = [[_mm512_setzero_ps(); 2]; MR];
        for i in 0..kp {
            // SAFETY: i < kp, so 2i + 1 < w.len() / 32 and r·kp + i < x.len().
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(wp.wrapping_add(2 * i + 64) as *const i8);
                let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(wp.add(2 * i)));
                let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(wp.add(2 * i + 1)));
                for (r, ar) in a.iter_mut().enumerate() {
                    let xv: __m512bh = std::mem::transmute(_mm512_set1_epi32(x[r * kp + i] as i32));
                    ar[0] = _mm512_dpbf16_ps(ar[0], xv, w0);
                    ar[1] = _mm512_dpbf16_ps(ar[1], xv, w1);
                }
            }
        }
        for (r, ar) in a.iter().enumerate() {
            // SAFETY: out[r] has 32 floats.
            unsafe {
                _mm512_storeu_ps(out[r].as_mut_ptr(), ar[0]);
                _mm512_storeu_ps(out[r].as_mut_ptr().add(16), ar[1]);
            }
        }
    }

    pub fn main() {
        if !is_x86_feature_detected!("avx512bf16") {
            println!("this CPU has no AVX512-BF16");
            return;
        }
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a one-thread pool");
        println!("one thread; µs per product (GB/s of bf16 weights)");
        for (k, n, count) in [(1024usize, 1024usize, 28usize), (256, 1024, 4)] {
            let dense: Vec<Vec<f32>> = (0..count).map(|i| values(k * n, i as u64 + 1)).collect();
            let widen: Vec<PackedLinear> = dense
                .iter()
                .map(|w| {
                    PackedLinear::new(w, k, n, None)
                        .expect("shape")
                        .into_format(WeightFormat::Bf16)
                })
                .collect();
            let pairs: Vec<PairPacked> = dense.iter().map(|w| PairPacked::new(w, k, n)).collect();
            println!("\n## K {k} × N {n}, {count} matrices");
            println!("| M | widen (AVX-512) | VDPBF16PS | max err widen | max err dp |");
            println!("|---|---|---|---|---|");
            for m in [1usize, 2, 4, 8] {
                let x = values(m * k, 99);
                let mut y = vec![0.0f32; m * n];
                let per = |s: f64| {
                    let us = s * 1e6 / count as f64;
                    format!("{us:.0} ({:.1})", (k * n * 2) as f64 / (us * 1e3))
                };
                let t_widen = one.install(|| {
                    median_time(15, || {
                        for p in &widen {
                            p.forward_with(Kernel::Avx512, &x, m, &mut y);
                        }
                    })
                });
                let t_dp = median_time(15, || {
                    for p in &pairs {
                        p.forward(&x, m, &mut y);
                    }
                });
                // Errors against the f32 product of the first matrix, relative to Σ|x·w|.
                let w = &dense[0];
                let err = |got: &[f32]| {
                    let mut worst = 0.0f64;
                    for r in 0..m {
                        for j in 0..n {
                            let (mut exact, mut scale) = (0.0f64, 0.0f64);
                            for kk in 0..k {
                                let v = f64::from(x[r * k + kk]) * f64::from(w[kk * n + j]);
                                exact += v;
                                scale += v.abs();
                            }
                            worst = worst.max((f64::from(got[r * n + j]) - exact).abs() / scale);
                        }
                    }
                    worst
                };
                let mut yw = vec![0.0f32; m * n];
                widen[0].forward_with(Kernel::Avx512, &x, m, &mut yw);
                let mut yd = vec![0.0f32; m * n];
                pairs[0].forward(&x, m, &mut yd);
                println!(
                    "| {m} | {} | {} | {:.1e} | {:.1e} |",
                    per(t_widen),
                    per(t_dp),
                    err(&yw),
                    err(&yd)
                );
            }
        }
    }
}
