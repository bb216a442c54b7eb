//! The machine's memory read bandwidth: a decode step must read every weight once, so the
//! weights' bytes at this bandwidth are the least a step can cost (its "floor").

use std::time::Instant;

use rayon::prelude::*;

/// Read bandwidth of this machine with every thread, GB/s: the best of 5 passes summing a
/// 256 MB buffer (past any cache). Weights larger than the caches cannot be read faster.
pub fn read_bandwidth_gbs() -> f64 {
    let data = vec![1.0f32; 64 << 20];
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let sum: f32 = data
            .par_chunks(1 << 16)
            .map(|c| {
                // Sixteen partial sums: vectorised, so the adds keep up with memory.
                let mut acc = [0.0f32; 16];
                for x in c.chunks_exact(16) {
                    for (a, v) in acc.iter_mut().zip(x) {
                        *a += v;
                    }
                }
                acc.iter().sum::<f32>()
            })
            .sum();
        std::hint::black_box(sum);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (data.len() * 4) as f64 / best / 1e9
}
