//! Small-M products `[M, K] × [K, N]` on this machine: the engine's packed kernels (each
//! family, f32 and bf16 weights) against the `gemm` crate 0.19 (what Burn's flex backend
//! calls), single- and multi-threaded. Weights are cycled through a set larger than the L3 cache (like the layers of
//! a model), so M = 1 shows the memory-bandwidth floor.
//!
//! `cargo run --release -p voxspec-engine --example small_m [-- --no-gemm]`

mod common;

use common::{median_time as time, values};
use voxspec_engine::{Kernel, PackedLinear, WeightFormat};

fn main() {
    let threads = rayon::current_num_threads();
    let with_gemm = !std::env::args().any(|a| a == "--no-gemm");
    println!("threads {threads}, kernels {:?}", Kernel::available());
    // (K, N, matrices): d 1024 (a base-preset layer's square products, 112 MB in all, past L3)
    // and d 256 (the small preset, 4 MB in all, inside L3).
    for (k, n, count) in [
        (1024usize, 1024usize, 28usize),
        (1024, 4096, 7),
        (256, 1024, 4),
    ] {
        let dense: Vec<Vec<f32>> = (0..count).map(|i| values(k * n, i as u64 + 1)).collect();
        let packed: Vec<PackedLinear> = dense
            .iter()
            .map(|w| PackedLinear::new(w, k, n, None).expect("shape"))
            .collect();
        let bf16: Vec<PackedLinear> = packed
            .iter()
            .map(|p| p.clone().into_format(WeightFormat::Bf16))
            .collect();
        let mb = (count * k * n * 4) as f64 / 1e6;
        println!(
            "\n## K {k} × N {n}, {count} matrices ({mb:.0} MB); µs per product (GB/s of weights)"
        );
        println!(
            "| M | engine best | engine avx2 | engine portable | bf16 avx512 | bf16 avx2 | bf16 portable | gemm (rayon {threads}) | gemm (1 thread) |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for m in [1usize, 2, 4, 8, 16] {
            let x = values(m * k, 99);
            let mut y = vec![0.0f32; m * n];
            let reps = 15;
            // GB/s of the weights actually read (bf16: half the bytes).
            let per = |s: f64, bytes: usize| {
                let us = s * 1e6 / count as f64;
                format!("{us:.0} ({:.1})", (k * n * bytes) as f64 / (us * 1e3))
            };
            let mut engine = |set: &[PackedLinear], kernel: Kernel| {
                let bytes = set[0].format().bytes_per_weight();
                per(
                    time(reps, || {
                        for p in set {
                            p.forward_with(kernel, &x, m, &mut y);
                        }
                    }),
                    bytes,
                )
            };
            let best = engine(&packed, Kernel::detect());
            let avx2 = engine(&packed, Kernel::Avx2);
            let portable = engine(&packed, Kernel::Portable);
            let b512 = engine(&bf16, Kernel::Avx512);
            let b2 = engine(&bf16, Kernel::Avx2);
            let bport = engine(&bf16, Kernel::Portable);
            if !with_gemm {
                println!("| {m} | {best} | {avx2} | {portable} | {b512} | {b2} | {bport} | | |");
                continue;
            }
            let mut gemm = |par: gemm::Parallelism| {
                per(
                    time(reps, || {
                        for w in &dense {
                            // SAFETY: dst [m, n], lhs [m, k], rhs [k, n], all row-major and sized.
                            unsafe {
                                gemm::gemm(
                                    m,
                                    n,
                                    k,
                                    y.as_mut_ptr(),
                                    1,
                                    n as isize,
                                    false,
                                    x.as_ptr(),
                                    1,
                                    k as isize,
                                    w.as_ptr(),
                                    1,
                                    n as isize,
                                    0.0,
                                    1.0,
                                    false,
                                    false,
                                    false,
                                    par,
                                );
                            }
                        }
                    }),
                    4,
                )
            };
            let g_par = gemm(gemm::Parallelism::Rayon(threads));
            let g_one = gemm(gemm::Parallelism::None);
            println!(
                "| {m} | {best} | {avx2} | {portable} | {b512} | {b2} | {bport} | {g_par} | {g_one} |"
            );
        }
    }
}
