//! The bf16 products of mixed-precision training against Burn's f32 product, at the linear
//! layers' shapes of a GPT-2-like training step (tokens × d_model × 4·d_model), forward and
//! both backward products, on each bf16 kernel this CPU has. Prints ms per product (median
//! of 5, packing included) and the ratio to Burn's.
//!
//! `cargo run --release -p voxspec-nn --example bf16_gemm`

use std::time::Instant;

use burn::tensor::{Device, Distribution, Tensor};
use voxspec_nn::bf16_gemm::{Bf16Kernel, MatRef, matmul};
use voxspec_nn::linear::{Bf16Matmul, MatmulPrecision, set_matmul_precision};

fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..5)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[2]
}

fn main() {
    let Some(kernel) = voxspec_nn::bf16_gemm::kernel() else {
        println!("this CPU has neither AMX-BF16 nor AVX512-BF16");
        return;
    };
    set_matmul_precision(MatmulPrecision::Bf16).expect("bf16");
    println!(
        "kernel {kernel:?}, {} threads",
        rayon::current_num_threads()
    );
    let dp = std::arch::is_x86_feature_detected!("avx512bf16");
    println!(
        "| product | m × k × n | f32 (Burn) ms | bf16 ({kernel:?}) ms | ratio | bf16 (VDPBF16PS) ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    let device = Device::flex();
    for (name, m, k, n) in [
        ("x·W (up)", 2048, 512, 2048),
        ("x·W (qkv)", 2048, 512, 1536),
        ("dy·Wᵀ (down)", 2048, 512, 2048),
        ("xᵀ·dy (up)", 512, 2048, 2048),
        ("x·W (down)", 2048, 2048, 512),
        ("xᵀ·dy (down)", 2048, 2048, 512),
        ("x·W (head)", 2048, 512, 1024),
    ] {
        let transpose_a = name.starts_with("xᵀ");
        let transpose_b = name.contains("Wᵀ");
        let a = if transpose_a {
            Tensor::<2>::random([k, m], Distribution::Normal(0.0, 1.0), &device).transpose()
        } else {
            Tensor::<2>::random([m, k], Distribution::Normal(0.0, 1.0), &device)
        };
        let b = if transpose_b {
            Tensor::<2>::random([n, k], Distribution::Normal(0.0, 1.0), &device).transpose()
        } else {
            Tensor::<2>::random([k, n], Distribution::Normal(0.0, 1.0), &device)
        };
        let f32_ms = median_ms(|| {
            let _ = a.clone().matmul(b.clone()).into_data();
        });
        let bf16_ms = median_ms(|| {
            let c = <burn::backend::Dispatch as Bf16Matmul>::bf16_matmul(
                a.clone().into_dispatch(),
                b.clone().into_dispatch(),
            );
            let _ = Tensor::<2>::from_dispatch(c).into_data();
        });
        let dp_cell = if dp && kernel == Bf16Kernel::Amx {
            let (ad, bd) = (a.to_data(), b.to_data());
            let (av, bv) = (
                ad.as_slice::<f32>().expect("f32"),
                bd.as_slice::<f32>().expect("f32"),
            );
            let va = MatRef::row_major(av, m, k).expect("a");
            let vb = MatRef::row_major(bv, k, n).expect("b");
            let ms = median_ms(|| {
                let _ = matmul(va, vb, Bf16Kernel::Avx512Bf16);
            });
            format!("{ms:.1} | {:.2}x", f32_ms / ms)
        } else {
            "– | –".into()
        };
        println!(
            "| {name} | {m} × {k} × {n} | {f32_ms:.1} | {bf16_ms:.1} | {:.2}x | {dp_cell} |",
            f32_ms / bf16_ms
        );
    }
}
