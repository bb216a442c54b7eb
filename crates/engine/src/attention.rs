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
//! Heads run in parallel ([`crate::team`]) when a block is large enough to pay for the fork.

use crate::matmul::{Kernel, NR};
use crate::team::{self, Disjoint};
use crate::vmath::softmax_scaled;

/// Work (query · key pairs × head width) below which the heads run on one thread.
const PARALLEL_MIN_WORK: usize = 1 << 17;

/// Queries whose scores are computed together: 16 rows of up to ~1000 keys stay in L1/L2. One
/// pass over a 590-position NAR input with all queries at once swept a 1.4 MB score matrix per
/// key dimension and made attention a third of the NAR's time.
const QUERY_TILE: usize = 16;
/// Most rows a matmul micro-kernel holds ([`Kernel::max_rows`] of every kernel is at most 8).
const MAX_TILE_ROWS: usize = 8;

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
    // Queries run in tiles of QUERY_TILE rows so a tile's scores (rows × keys) stay in cache
    // while every key row passes over them; a decoding step (≤ 16 new tokens) is one tile.
    // Scores of query i: keys 0 ..= start + i (causal) or every key. Each key row of kᵀ is read
    // once per tile, then each value row likewise; the sums run in the same order for any
    // tiling.
    let keys = start + new;
    for t0 in (0..new).step_by(QUERY_TILE) {
        let rows = QUERY_TILE.min(new - t0);
        let visible = |gi: usize| if causal { start + gi + 1 } else { keys };
        let scores = &mut scores[..rows * keys];
        scores.fill(0.0);
        for dd in 0..hd {
            let row = &kt[dd * capacity..dd * capacity + keys];
            for i in 0..rows {
                let qd = q[(t0 + i) * q_stride + dd];
                let seen = visible(t0 + i);
                for (sj, &kv) in scores[i * keys..i * keys + seen]
                    .iter_mut()
                    .zip(&row[..seen])
                {
                    *sj += qd * kv;
                }
            }
        }
        for i in 0..rows {
            softmax_scaled(&mut scores[i * keys..i * keys + visible(t0 + i)], scale);
        }
        let ctx = &mut ctx[t0 * hd..(t0 + rows) * hd];
        ctx.fill(0.0);
        let last_key = if causal { start + t0 + rows } else { keys };
        for j in 0..last_key {
            let vj = &vh[j * hd..(j + 1) * hd];
            // Causal: query t0 + i sees key j when t0 + i ≥ j − start.
            let first = if causal {
                j.saturating_sub(start).saturating_sub(t0)
            } else {
                0
            };
            for i in first..rows {
                let p = scores[i * keys + j];
                for (cv, &vv) in ctx[i * hd..(i + 1) * hd].iter_mut().zip(vj) {
                    *cv += p * vv;
                }
            }
        }
    }
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
    if !causal && new > QUERY_TILE {
        attend_head_blocked(q, q_stride, kt, capacity, vh, hd, new, scale, scores, ctx);
        return;
    }
    match Kernel::detect().widening() {
        Kernel::Avx512 => attend_head_strided(
            Kernel::Avx512,
            q,
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
        ),
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

/// One head as two register-blocked products over the cache as it lies (see
/// `matmul/strided.rs`), eight queries at a time: their scores against the keys they can see
/// (`q · kᵀ`, 32 keys per block, the block's keys in registers for all head dimensions), the
/// softmax of each row with the keys past its own position set to 0, then `ctx = p · v` (32
/// head dimensions per block). The axpy body above loads and stores every score once per head
/// dimension; this one once.
#[allow(clippy::too_many_arguments)]
fn attend_head_strided(
    kernel: Kernel,
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
    let keys = start + new;
    let mut acc = [[0.0f32; NR]; MAX_TILE_ROWS];
    for t0 in (0..new).step_by(MAX_TILE_ROWS) {
        let rows = MAX_TILE_ROWS.min(new - t0);
        // Keys the chunk reads: up to its last query's position (causal) or all.
        let seen = if causal { start + t0 + rows } else { keys };
        let scores = &mut scores[..rows * seen];
        for j0 in (0..seen).step_by(NR) {
            let width = NR.min(seen - j0);
            kernel.run_strided(
                rows,
                &q[t0 * q_stride..],
                q_stride,
                hd,
                &kt[j0..],
                capacity,
                width,
                &mut acc,
            );
            for (i, a) in acc[..rows].iter().enumerate() {
                scores[i * seen + j0..i * seen + j0 + width].copy_from_slice(&a[..width]);
            }
        }
        for (i, row) in scores.chunks_exact_mut(seen).enumerate() {
            let visible = if causal { start + t0 + i + 1 } else { keys };
            softmax_scaled(&mut row[..visible], scale);
            row[visible..].fill(0.0);
        }
        for c0 in (0..hd).step_by(NR) {
            let width = NR.min(hd - c0);
            kernel.run_strided(rows, scores, seen, seen, &vh[c0..], hd, width, &mut acc);
            for (i, a) in acc[..rows].iter().enumerate() {
                ctx[(t0 + i) * hd + c0..(t0 + i) * hd + c0 + width].copy_from_slice(&a[..width]);
            }
        }
    }
}

/// One head of a bidirectional block over all `new` positions (a NAR pass, `start` = 0) as two
/// register-blocked products on the matmul micro-kernels: scores = q · kᵀ, then ctx = p · v,
/// with kᵀ and v packed into 32-column panels first. Per key, the rows of the axpy kernel
/// above load and store their scores once per head dimension; here they stay in registers.
#[allow(clippy::too_many_arguments)]
fn attend_head_blocked(
    q: &[f32],
    q_stride: usize,
    kt: &[f32],
    capacity: usize,
    vh: &[f32],
    hd: usize,
    new: usize,
    scale: f32,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    let kernel = Kernel::detect();
    let mr = kernel.max_rows();
    let keys = new;
    // kᵀ [hd, keys] (row stride `capacity`) and v [keys, hd] as the kernels' weight panels.
    let k_panels = keys.div_ceil(NR);
    let kp = pack_panels(kt, hd, keys, capacity);
    let v_panels = hd.div_ceil(NR);
    let vp = pack_panels(vh, keys, hd, hd);
    let scores = &mut scores[..new * keys];
    let mut xq = vec![0.0f32; mr * hd];
    let mut acc = [[0.0f32; NR]; MAX_TILE_ROWS];
    for r0 in (0..new).step_by(mr) {
        let rows = mr.min(new - r0);
        for i in 0..rows {
            xq[i * hd..(i + 1) * hd]
                .copy_from_slice(&q[(r0 + i) * q_stride..(r0 + i) * q_stride + hd]);
        }
        for p in 0..k_panels {
            let cols = NR.min(keys - p * NR);
            kernel.run(rows, &xq, hd, &kp[p * hd * NR..], &mut acc[..rows]);
            for (i, a) in acc[..rows].iter().enumerate() {
                scores[(r0 + i) * keys + p * NR..(r0 + i) * keys + p * NR + cols]
                    .copy_from_slice(&a[..cols]);
            }
        }
    }
    for s in scores.chunks_exact_mut(keys) {
        softmax_scaled(s, scale);
    }
    let ctx = &mut ctx[..new * hd];
    for r0 in (0..new).step_by(mr) {
        let rows = mr.min(new - r0);
        for p in 0..v_panels {
            let cols = NR.min(hd - p * NR);
            kernel.run(
                rows,
                &scores[r0 * keys..],
                keys,
                &vp[p * keys * NR..],
                &mut acc[..rows],
            );
            for (i, a) in acc[..rows].iter().enumerate() {
                ctx[(r0 + i) * hd + p * NR..(r0 + i) * hd + p * NR + cols]
                    .copy_from_slice(&a[..cols]);
            }
        }
    }
}

/// A `[rows, cols]` matrix (row stride `stride`) in the matmul's panel layout:
/// `[cols / NR][rows][NR]`, the last panel zero-padded.
fn pack_panels(src: &[f32], rows: usize, cols: usize, stride: usize) -> Vec<f32> {
    let panels = cols.div_ceil(NR);
    let mut packed = vec![0.0f32; panels * rows * NR];
    for p in 0..panels {
        let width = NR.min(cols - p * NR);
        for r in 0..rows {
            packed[(p * rows + r) * NR..(p * rows + r) * NR + width]
                .copy_from_slice(&src[r * stride + p * NR..r * stride + p * NR + width]);
        }
    }
    packed
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
    if keys * new * hd * heads < PARALLEL_MIN_WORK {
        for (h, (s, c)) in scores
            .chunks_exact_mut(new * keys)
            .zip(ctx.chunks_exact_mut(new * hd))
            .enumerate()
        {
            head(h, s, c);
        }
    } else {
        let (s, c) = (Disjoint::new(scores), Disjoint::new(ctx));
        team::run(heads, &|h| {
            // SAFETY: head h writes only its own `new · keys` scores and `new · hd` context
            // values, disjoint between the heads.
            let (s, c) = unsafe {
                (
                    s.range(h * new * keys, new * keys),
                    c.range(h * new * hd, new * hd),
                )
            };
            head(h, s, c);
        });
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

    /// Blocks longer than a query tile, causal after cached positions and bidirectional,
    /// against a naive softmax attention in f64.
    #[test]
    fn tiled_blocks_match_a_naive_attention() {
        let (heads, hd, capacity) = (2usize, 4usize, 64usize);
        let mut state = 7u64;
        let mut draw = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        let k: Vec<f32> = (0..heads * hd * capacity).map(|_| draw()).collect();
        let v: Vec<f32> = (0..heads * capacity * hd).map(|_| draw()).collect();
        for (start, new, causal) in [
            (5usize, 40usize, true),
            (0, 37, false),
            (3, 17, true),
            (0, 9, false),
            (50, 1, true),
            (45, 8, true),
        ] {
            let layout = HeadLayout {
                heads,
                head_dim: hd,
                capacity,
                causal,
            };
            let q: Vec<f32> = (0..new * heads * hd).map(|_| draw()).collect();
            let keys = start + new;
            let mut scores = vec![0.0; heads * new * keys];
            let mut ctx = vec![0.0; heads * new * hd];
            let mut out = vec![0.0; new * heads * hd];
            attend(
                layout,
                &q,
                heads * hd,
                &k,
                &v,
                start,
                new,
                &mut scores,
                &mut ctx,
                &mut out,
            );
            for h in 0..heads {
                for i in 0..new {
                    let seen = if causal { start + i + 1 } else { keys };
                    let logits: Vec<f64> = (0..seen)
                        .map(|j| {
                            (0..hd)
                                .map(|dd| {
                                    f64::from(q[i * heads * hd + h * hd + dd])
                                        * f64::from(k[(h * hd + dd) * capacity + j])
                                })
                                .sum::<f64>()
                                / (hd as f64).sqrt()
                        })
                        .collect();
                    let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = logits.iter().map(|l| (l - max).exp()).sum();
                    for dd in 0..hd {
                        let want: f64 = logits
                            .iter()
                            .enumerate()
                            .map(|(j, l)| {
                                (l - max).exp() / z * f64::from(v[(h * capacity + j) * hd + dd])
                            })
                            .sum();
                        let got = f64::from(out[i * heads * hd + h * hd + dd]);
                        assert!(
                            (got - want).abs() < 1e-5,
                            "start {start}, new {new}, causal {causal}, head {h}, query {i}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }

    /// The register-blocked head (each kernel, the portable one included) against the axpy
    /// body, per head, on decoding-sized blocks past a long cache and on a ragged width.
    #[test]
    fn strided_heads_equal_the_axpy_body() {
        let mut state = 3u64;
        let mut draw = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        };
        for (hd, capacity, start, new, causal) in [
            (64usize, 260usize, 200usize, 1usize, true),
            (64, 260, 200, 8, true),
            (16, 100, 31, 13, true),
            (40, 70, 0, 11, false),
        ] {
            let kt: Vec<f32> = (0..hd * capacity).map(|_| draw()).collect();
            let v: Vec<f32> = (0..capacity * hd).map(|_| draw()).collect();
            let q_stride = 3 * hd;
            let q: Vec<f32> = (0..new * q_stride).map(|_| draw()).collect();
            let keys = start + new;
            let scale = 0.3;
            let mut scores = vec![0.0; new * keys];
            let mut want = vec![0.0; new * hd];
            attend_head_body(
                &q,
                q_stride,
                &kt,
                capacity,
                &v[..keys * hd],
                hd,
                start,
                new,
                causal,
                scale,
                &mut scores,
                &mut want,
            );
            for kernel in Kernel::available() {
                let mut got = vec![f32::NAN; new * hd];
                attend_head_strided(
                    kernel,
                    &q,
                    q_stride,
                    &kt,
                    capacity,
                    &v[..keys * hd],
                    hd,
                    start,
                    new,
                    causal,
                    scale,
                    &mut scores,
                    &mut got,
                );
                let d = crate::matmul::tests::max_diff(&got, &want);
                assert!(d < 1e-5, "{kernel:?} hd {hd} start {start} new {new}: {d}");
            }
        }
    }
}
