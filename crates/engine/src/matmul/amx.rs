//! bf16 products on AMX tiles (Intel AMX-BF16: Sapphire Rapids and later), for
//! [`super::PackedLinear`] with bf16 weights when a step has [`MIN_ROWS`] rows or more.
//!
//! `TDPBF16PS` multiplies a tile of up to 16 rows × 32 bf16 (`x`, 16 pairs of K per row) by a
//! tile of 16 pairs × 16 columns (the weights, two K rows interleaved per column) and adds the
//! f32 products into a 16 × 16 f32 tile. The bf16 panels are already in that layout (see
//! [`super::bf16`]): a B tile is 16 pair-lines of one 16-column half of a panel, read with a
//! 128-byte stride. Per row block and group of two panels (64 columns) four accumulator tiles
//! stay in the tile registers while K is walked once:
//!
//! ```text
//! tmm0..3  C: rows × 16 f32 each (columns 0..16, 16..32 of panel a; the same of panel b)
//! tmm4, 5  A: the rows' x as bf16, high and low parts, 32 K values each
//! tmm6, 7  B: one half of a panel, 16 pairs of K rows × 16 columns
//! ```
//!
//! The activations are not rounded to bf16: each is split as `x = hi + lo` with `hi` its bf16
//! rounding and `lo` the bf16 rounding of the rest, and both are multiplied (two `TDPBF16PS`
//! per tile pair). `x` then carries 16 mantissa bits (relative error ≤ 2⁻¹⁷), so the product is
//! the widening kernels' `Σ x · bf16(w)` up to f32 summation order — the format computes the
//! same thing whichever kernel runs it. Tiles flush denormal inputs and results to zero.
//!
//! Rust has no stable AMX intrinsics; the instructions are written as inline assembly, and the
//! tile registers, which the compiler never uses, hold state between the `asm!` blocks of one
//! call. Linux grants a process the tile state only on request (`arch_prctl`), made once in
//! [`available`].

/// Rows from which a bf16 product runs on the tiles; fewer stay on the AVX-512 widening
/// kernel. Measured on the 2-vCPU Xeon this was written on (`examples/amx.rs`, one thread,
/// widths 256–1024, weights in L2/L3): a `TDPBF16PS` cost the same whatever its rows (≈ 40–100
/// cycles, well above Intel's 16), so the tiles took 0.52–0.78x the widening kernel's time at
/// 12–32 rows, 0.79–1.07x at 8 and 1.5–2x at 2; at one row the same.
pub(crate) const MIN_ROWS: usize = 12;

/// Whether this CPU has AMX-TILE and AMX-BF16 and the OS lets this process use them (the
/// training products' answer, asked once and kept).
pub(crate) fn available() -> bool {
    voxspec_nn::bf16_gemm::amx_available()
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use tiles::panels;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tiles {
    use std::arch::asm;
    use std::cell::RefCell;
    use std::ops::Range;

    use super::super::bf16::{Bf16Row, K_ALIGN, bf16_to_f32, f32_to_bf16, lines_per_panel};
    use super::super::{NR, OutPtr};
    use voxspec_nn::bf16_gemm::TileConfig;

    /// Rows of a tile.
    const TILE_ROWS: usize = 16;
    /// Columns of a group: two panels, four accumulator tiles.
    const GROUP_COLS: usize = 2 * NR;

    /// Per-thread buffers: the rows' activations as bf16 high and low parts, `[rows, kpad]`.
    #[derive(Default)]
    struct Scratch {
        hi: Vec<u16>,
        lo: Vec<u16>,
    }

    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
    }

    /// `y[.., panels] = x · W + b` for the panels in `panels` (their columns below N) of all `m`
    /// rows, on the tiles.
    ///
    /// # Shapes
    /// - `x`: `[m, k]` row-major
    /// - `w`: every panel's [`lines_per_panel`]`(k)` lines, panel after panel
    /// - `bias`: `[n]`
    /// - `y`: `[m, n]` row-major, the panels' columns overwritten
    ///
    /// # Safety
    /// [`super::available`] must be true and the CPU must have AVX-512F; `y` must point to
    /// `m · n` writable floats of which no other thread writes these panels' columns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn panels(
        x: &[f32],
        m: usize,
        k: usize,
        n: usize,
        w: &[Bf16Row],
        bias: Option<&[f32]>,
        panels: Range<usize>,
        y: OutPtr,
    ) {
        let kpad = lines_per_panel(k);
        // Rows per block: m up to a full tile; more rows run in blocks of 16, the last one
        // padded with zero rows, so one tile configuration serves the whole call.
        let block = m.min(TILE_ROWS);
        let padded = m.next_multiple_of(block);
        SCRATCH.with_borrow_mut(|s| {
            // SAFETY: the caller's contract includes AVX-512F.
            unsafe { split_avx512(x, m, k, kpad, padded, s) };
            let config = config(block);
            // SAFETY: the caller guarantees AMX (and its OS permission); `config` is a valid
            // palette-1 configuration.
            unsafe { asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, preserves_flags)) };
            let mut acc = [[0.0f32; GROUP_COLS]; TILE_ROWS];
            for r0 in (0..padded).step_by(block) {
                let hi = &s.hi[r0 * kpad..];
                let lo = &s.lo[r0 * kpad..];
                for p in panels.clone().step_by(2) {
                    let pair = p + 1 < panels.end;
                    // SAFETY: `hi`, `lo` hold `block` rows of `kpad` values from r0; panels p
                    // (and p + 1 when `pair`) exist in `w` (the caller's range).
                    unsafe { group(hi, lo, kpad, w, p, pair, &mut acc) };
                    let width = if pair { GROUP_COLS } else { NR };
                    let col0 = p * NR;
                    let cols = width.min(n - col0);
                    for (r, acc_r) in acc.iter().enumerate().take(block.min(m - r0)) {
                        // SAFETY: row r0 + r < m, columns col0 .. col0 + cols ≤ n; this
                        // thread's panels only (the caller's contract).
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(y.0.add((r0 + r) * n + col0), cols)
                        };
                        match bias {
                            Some(b) => {
                                for ((d, &a), &bv) in dst.iter_mut().zip(acc_r).zip(&b[col0..]) {
                                    *d = a + bv;
                                }
                            }
                            None => dst.copy_from_slice(&acc_r[..cols]),
                        }
                    }
                }
            }
            // SAFETY: as `ldtilecfg`; returns the tile state to its initial (cheap to save)
            // state.
            unsafe { asm!("tilerelease", options(nostack, preserves_flags)) };
        });
    }

    /// [`split`] compiled for AVX-512 (the conversions vectorise; the baseline build ran them
    /// four values at a time, ~15 % of a 31-row prefill's tile time).
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn split_avx512(
        x: &[f32],
        m: usize,
        k: usize,
        kpad: usize,
        padded: usize,
        s: &mut Scratch,
    ) {
        split(x, m, k, kpad, padded, s);
    }

    /// Rows `0..m` of `x` as bf16 `hi` and `lo` parts, `[padded, kpad]`, zero past `m` and `k`.
    #[inline(always)]
    fn split(x: &[f32], m: usize, k: usize, kpad: usize, padded: usize, s: &mut Scratch) {
        s.hi.clear();
        s.hi.resize(padded * kpad, 0);
        s.lo.clear();
        s.lo.resize(padded * kpad, 0);
        for r in 0..m {
            let row = &x[r * k..(r + 1) * k];
            let (hi, lo) = (&mut s.hi[r * kpad..], &mut s.lo[r * kpad..]);
            for ((&v, h), l) in row.iter().zip(hi.iter_mut()).zip(lo.iter_mut()) {
                *h = f32_to_bf16(v);
                let rest = v - bf16_to_f32(*h);
                *l = if rest.is_finite() {
                    f32_to_bf16(rest)
                } else {
                    0
                };
            }
        }
    }

    /// Tiles 0–3 (C) and 4–5 (A) of `rows` rows, 6–7 (B) of 16 rows, all 64 bytes wide.
    fn config(rows: usize) -> TileConfig {
        let r = rows as u8;
        TileConfig::new([r, r, r, r, r, r, TILE_ROWS as u8, TILE_ROWS as u8])
    }

    /// `acc[.., 0..32] = x · panel p`, and `acc[.., 32..64] = x · panel p + 1` when `pair`,
    /// for the configured rows.
    ///
    /// # Safety
    /// The tiles must be configured (`config`); `hi`, `lo` must hold the configured rows of
    /// `kpad` values; `w` must hold panels p (and p + 1) of `kpad` lines each.
    #[inline(always)]
    unsafe fn group(
        hi: &[u16],
        lo: &[u16],
        kpad: usize,
        w: &[Bf16Row],
        p: usize,
        pair: bool,
        acc: &mut [[f32; GROUP_COLS]; TILE_ROWS],
    ) {
        let a_stride = kpad * 2;
        let b_stride = 2 * size_of::<Bf16Row>();
        let wa = w[p * kpad..].as_ptr();
        let wb = if pair {
            w[(p + 1) * kpad..].as_ptr()
        } else {
            wa
        };
        // SAFETY: every address below lies within `hi`/`lo` (rows × kpad) or within the
        // panels' lines (K block kb covers lines kb·32 .. kb·32 + 32 of a panel); the caller
        // configured the tiles.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, preserves_flags)
            );
            for kb in 0..kpad / K_ALIGN {
                let xh = hi.as_ptr().add(kb * K_ALIGN);
                let xl = lo.as_ptr().add(kb * K_ALIGN);
                asm!(
                    "tileloadd tmm4, [{xh} + {s}*1]",
                    "tileloadd tmm5, [{xl} + {s}*1]",
                    xh = in(reg) xh,
                    xl = in(reg) xl,
                    s = in(reg) a_stride,
                    options(nostack, preserves_flags, readonly)
                );
                let b0 = wa.add(kb * K_ALIGN);
                asm!(
                    "tileloadd tmm6, [{b} + {s}*1]",
                    "tileloadd tmm7, [{b1} + {s}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm0, tmm5, tmm6",
                    "tdpbf16ps tmm1, tmm5, tmm7",
                    b = in(reg) b0,
                    b1 = in(reg) b0.add(1),
                    s = in(reg) b_stride,
                    options(nostack, preserves_flags, readonly)
                );
                if pair {
                    let b0 = wb.add(kb * K_ALIGN);
                    asm!(
                        "tileloadd tmm6, [{b} + {s}*1]",
                        "tileloadd tmm7, [{b1} + {s}*1]",
                        "tdpbf16ps tmm2, tmm4, tmm6",
                        "tdpbf16ps tmm3, tmm4, tmm7",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        b = in(reg) b0,
                        b1 = in(reg) b0.add(1),
                        s = in(reg) b_stride,
                        options(nostack, preserves_flags, readonly)
                    );
                }
            }
            let c = acc.as_mut_ptr() as *mut f32;
            let c_stride = GROUP_COLS * size_of::<f32>();
            asm!(
                "tilestored [{c0} + {s}*1], tmm0",
                "tilestored [{c1} + {s}*1], tmm1",
                "tilestored [{c2} + {s}*1], tmm2",
                "tilestored [{c3} + {s}*1], tmm3",
                c0 = in(reg) c,
                c1 = in(reg) c.add(16),
                c2 = in(reg) c.add(32),
                c3 = in(reg) c.add(48),
                s = in(reg) c_stride,
                options(nostack, preserves_flags)
            );
        }
    }
}
