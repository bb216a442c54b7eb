//! Causal (or bidirectional) attention of a block of new queries over one sequence's cached keys and values
//! (Vaswani et al. 2017, §3.2.1: `softmax(q·kᵀ / √d_head) · v`), head by head, as
//! `voxspec-nn`'s cached forward computes it: the scores are scaled after the dot product,
//! softmax subtracts the row maximum, the weights are normalised before they multiply `v`.
//!
//! ```text
//! cache of one sequence, one head:  kᵀ [head_dim, capacity], v [capacity, head_dim]
//!                                   positions 0 .. start + new valid
//! query i of the block (position start + i) attends to keys 0 ..= start + i
//!   (bidirectional models, `causal: false`: to keys 0 .. start + new)
//! ```
//!
//! Heads run in parallel when a block is large enough to pay for the fork.

use rayon::prelude::*;

use crate::matmul::Kernel;

/// Work (query · key pairs × head width) below which the heads run on one thread.
const PARALLEL_MIN_WORK: usize = 1 << 20;

/// One head of [`attend`]: `new` queries (rows of stride `q_stride`) over the keys `kt`
/// (`[head_dim, capacity]`, transposed) and values `vh` (`[keys, head_dim]`), into `ctx`
/// `[new, head_dim]`. With the keys transposed the scores of a query are `head_dim` axpys over
/// the visible keys — plain vector FMAs, no horizontal sums.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_head_body(
    q: &[f32],
    q_stride: usize,
    kt: &[f32],
    capacity: usize,
    vh: &[f32],
    hd: usize,
    start: usize,
    new: usize,
    causal: bool,
    scale: f32,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    // Scores [new, keys]: query i sees keys 0 ..= start + i (causal) or every key. Each key row of kᵀ is read once
    // for all the block's queries (it stays in L1), then each value row likewise.
    let keys = start + new;
    let scores = &mut scores[..new * keys];
    scores.fill(0.0);
    for dd in 0..hd {
        let row = &kt[dd * capacity..dd * capacity + keys];
        for i in 0..new {
            let qd = q[i * q_stride + dd];
            let visible = if causal { start + i + 1 } else { keys };
            for (sj, &kv) in scores[i * keys..i * keys + visible]
                .iter_mut()
                .zip(&row[..visible])
            {
                *sj += qd * kv;
            }
        }
    }
    for i in 0..new {
        let visible = if causal { start + i + 1 } else { keys };
        let s = &mut scores[i * keys..i * keys + visible];
        let mut max = f32::NEG_INFINITY;
        for sj in s.iter_mut() {
            *sj *= scale;
            max = max.max(*sj);
        }
        let mut sum = 0.0f32;
        for sj in s.iter_mut() {
            *sj = (*sj - max).exp();
            sum += *sj;
        }
        for sj in s.iter_mut() {
            *sj /= sum;
        }
    }
    let ctx = &mut ctx[..new * hd];
    ctx.fill(0.0);
    for j in 0..keys {
        let vj = &vh[j * hd..(j + 1) * hd];
        let first = if causal { j.saturating_sub(start) } else { 0 };
        for i in first..new {
            let p = scores[i * keys + j];
            for (cv, &vv) in ctx[i * hd..(i + 1) * hd].iter_mut().zip(vj) {
                *cv += p * vv;
            }
        }
    }
}

/// [`attend_head_body`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn attend_head_avx512(
    q: &[f32],
    q_stride: usize,
    kt: &[f32],
    capacity: usize,
    vh: &[f32],
    hd: usize,
    start: usize,
    new: usize,
    causal: bool,
    scale: f32,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    attend_head_body(
        q, q_stride, kt, capacity, vh, hd, start, new, causal, scale, scores, ctx,
    );
}

/// [`attend_head_body`] compiled for AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn attend_head_avx2(
    q: &[f32],
    q_stride: usize,
    kt: &[f32],
    capacity: usize,
    vh: &[f32],
    hd: usize,
    start: usize,
    new: usize,
    causal: bool,
    scale: f32,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    attend_head_body(
        q, q_stride, kt, capacity, vh, hd, start, new, causal, scale, scores, ctx,
    );
}

/// One head with the widest vectors this CPU has (the same kernel families as the matmul).
#[allow(clippy::too_many_arguments)]
fn attend_head(
    q: &[f32],
    q_stride: usize,
    kt: &[f32],
    capacity: usize,
    vh: &[f32],
    hd: usize,
    start: usize,
    new: usize,
    causal: bool,
    scale: f32,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    match Kernel::detect() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx512` is detected only on CPUs with AVX-512F.
        Kernel::Avx512 => unsafe {
            attend_head_avx512(
                q, q_stride, kt, capacity, vh, hd, start, new, causal, scale, scores, ctx,
            )
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2` is detected only on CPUs with AVX2.
        Kernel::Avx2 => unsafe {
            attend_head_avx2(
                q, q_stride, kt, capacity, vh, hd, start, new, causal, scale, scores, ctx,
            )
        },
        _ => attend_head_body(
            q, q_stride, kt, capacity, vh, hd, start, new, causal, scale, scores, ctx,
        ),
    }
}

/// The geometry of one layer's cache for one sequence.
#[derive(Debug, Clone, Copy)]
pub struct HeadLayout {
    /// Heads.
    pub heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Positions the cache holds per sequence.
    pub capacity: usize,
    /// Query i of a block sees keys up to its own position only (false: every valid key, for
    /// bidirectional models).
    pub causal: bool,
}

/// Attention of `new` queries at positions `start .. start + new` of one sequence, whose keys
/// and values (the block's included) are already in the cache.
///
/// # Shapes
/// - `q`: `[new, heads · head_dim]` (rows of stride `q_stride`; the first `heads · head_dim`
///   values of each row are the queries, head-major)
/// - `k`: `[heads, head_dim, capacity]` (transposed), this sequence's slice of the layer cache
/// - `v`: `[heads, capacity, head_dim]`, likewise
/// - `scores`: scratch of at least `heads · new · (start + new)` values
/// - `ctx`: scratch of at least `heads · new · head_dim` values
/// - `out`: `[new, heads · head_dim]`, overwritten
#[allow(clippy::too_many_arguments)]
pub fn attend(
    layout: HeadLayout,
    q: &[f32],
    q_stride: usize,
    k: &[f32],
    v: &[f32],
    start: usize,
    new: usize,
    scores: &mut [f32],
    ctx: &mut [f32],
    out: &mut [f32],
) {
    let HeadLayout {
        heads,
        head_dim: hd,
        capacity,
        causal,
    } = layout;
    let keys = start + new;
    let scale = (1.0 / (hd as f64).sqrt()) as f32;
    let head = |h: usize, scores: &mut [f32], ctx: &mut [f32]| {
        let kt = &k[h * hd * capacity..(h + 1) * hd * capacity];
        let vh = &v[h * capacity * hd..(h * capacity + keys) * hd];
        attend_head(
            &q[h * hd..],
            q_stride,
            kt,
            capacity,
            vh,
            hd,
            start,
            new,
            causal,
            scale,
            scores,
            ctx,
        );
    };
    let scores = &mut scores[..heads * new * keys];
    let ctx = &mut ctx[..heads * new * hd];
    if keys * new * hd * heads < PARALLEL_MIN_WORK || rayon::current_num_threads() <= 1 {
        for (h, (s, c)) in scores
            .chunks_exact_mut(new * keys)
            .zip(ctx.chunks_exact_mut(new * hd))
            .enumerate()
        {
            head(h, s, c);
        }
    } else {
        scores
            .par_chunks_exact_mut(new * keys)
            .zip(ctx.par_chunks_exact_mut(new * hd))
            .enumerate()
            .for_each(|(h, (s, c))| head(h, s, c));
    }
    // [heads, new, head_dim] -> [new, heads · head_dim]
    let d = heads * hd;
    for h in 0..heads {
        for i in 0..new {
            out[i * d + h * hd..i * d + (h + 1) * hd]
                .copy_from_slice(&ctx[(h * new + i) * hd..(h * new + i + 1) * hd]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One head, two cached keys and one new one: the output is the softmax-weighted mean of
    /// the values computed by hand, and the future (a fourth key) is not seen.
    #[test]
    fn one_head_matches_a_hand_computation() {
        let layout = HeadLayout {
            heads: 1,
            head_dim: 2,
            capacity: 4,
            causal: true,
        };
        // Keys (1, 0), (0, 1), (1, 1), (100, 100), transposed: [head_dim, capacity].
        let k = [1.0, 0.0, 1.0, 100.0, 0.0, 1.0, 1.0, 100.0];
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1e6, 1e6];
        let q = [2.0, 0.0];
        let (mut scores, mut ctx, mut out) = ([0.0; 4], [0.0; 2], [0.0; 2]);
        attend(layout, &q, 2, &k, &v, 2, 1, &mut scores, &mut ctx, &mut out);
        let s: Vec<f64> = [2.0f64, 0.0, 2.0]
            .iter()
            .map(|x| (x / 2f64.sqrt()).exp())
            .collect();
        let z: f64 = s.iter().sum();
        let want0 = (s[0] * 1.0 + s[1] * 3.0 + s[2] * 5.0) / z;
        let want1 = (s[0] * 2.0 + s[1] * 4.0 + s[2] * 6.0) / z;
        assert!((f64::from(out[0]) - want0).abs() < 1e-5, "{out:?}");
        assert!((f64::from(out[1]) - want1).abs() < 1e-5, "{out:?}");
    }
}
