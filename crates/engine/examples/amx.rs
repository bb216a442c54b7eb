//! The bf16 format's two kernels on one thread: AVX-512 widening (weights widened to f32 in
//! registers, f32 FMAs) against AMX tiles (`TDPBF16PS`, activations split into two bf16 parts),
//! for the main job's product shapes (width 256) and the base preset's (width 1024), at the
//! row counts of a decoding step. Prints µs per product, median of many; the weights of each
//! shape are few enough to stay in L2/L3, as the main job's do.
//!
//! `cargo run --release -p voxspec-engine --example amx`

mod common;

use voxspec_engine::{Kernel, PackedLinear, WeightFormat};

use crate::common::{median_time, values};

fn main() {
    if !Kernel::Amx.supported() {
        println!(
            "this CPU (or OS) has no AMX-BF16; kernels: {:?}",
            Kernel::available()
        );
        return;
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    pool.install(|| {
        println!("| k × n | m | avx512 µs | amx µs | amx / avx512 |");
        println!("|---|---|---|---|---|");
        for (k, n) in [
            (256, 768),
            (256, 1536),
            (768, 256),
            (256, 1024),
            (1024, 1024),
        ] {
            let w = values(k * n, 1);
            let lin = PackedLinear::new(&w, k, n, Some(values(n, 2)))
                .expect("shapes")
                .into_format(WeightFormat::Bf16);
            for m in [1, 2, 8, 12, 16, 32] {
                let x = values(m * k, 3);
                let mut y = vec![0.0f32; m * n];
                let reps = 2000;
                let wide = median_time(reps, || lin.forward_with(Kernel::Avx512, &x, m, &mut y));
                let tiles = median_time(reps, || lin.forward_with(Kernel::Amx, &x, m, &mut y));
                println!(
                    "| {k} × {n} | {m} | {:.1} | {:.1} | {:.2} |",
                    wide * 1e6,
                    tiles * 1e6,
                    tiles / wide
                );
            }
        }
    });
}
