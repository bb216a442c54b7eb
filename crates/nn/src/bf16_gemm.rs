//! Matrix products with bf16 operands and f32 accumulation on the CPU, for mixed-precision
//! training: AMX-BF16 tiles (Intel Sapphire Rapids and later) or AVX512-BF16's `VDPBF16PS`
//! (AMD Zen 4, Intel Cooper Lake and later).
//!
//! Both operands are rounded to bf16 (nearest, ties to even; denormals may flush to zero, as
//! the instructions treat them) as they are packed, every product is exact in f32 and the sums
//! are f32 — the arithmetic of PyTorch's CPU autocast to bf16. Packing reads any strided f32 view, so `a · bᵀ` and `aᵀ · b` (a linear layer's
//! backward products) need no transposed copy:
//!
//! ```text
//! A  [mp, kp]            rows of bf16, m padded to 32 rows, k to 32 (zeros)
//! B  [np / 16][kp / 2][16][2]   per 16 columns, K in pairs: the two values of rows 2p, 2p+1
//!                               of one column side by side (the "VNNI" layout both
//!                               instructions read)
//! C  [mp, np] f32        trimmed to [m, n] on return
//! ```
//!
//! On AMX a 32 × 32 block of C lives in four accumulator tiles while K is walked 32 at a time
//! (two A tiles, two B tiles, four `TDPBF16PS`); on AVX512-BF16 an 8 × 32 block lives in 16
//! vector registers while K is walked a pair at a time. Rows are split over the rayon pool in
//! chunks whose A rows stay in L2 while every column block passes over them.

use std::sync::OnceLock;

use rayon::prelude::*;

/// The instruction set a bf16 product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bf16Kernel {
    /// AMX-BF16 tiles (`TDPBF16PS`).
    Amx,
    /// AVX512-BF16 (`VDPBF16PS`).
    Avx512Bf16,
}

/// The fastest bf16 kernel this CPU (and OS) offers, or `None` when it has neither AMX-BF16
/// nor AVX512-BF16 (asked once; the answer is kept).
pub fn kernel() -> Option<Bf16Kernel> {
    static KERNEL: OnceLock<Option<Bf16Kernel>> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        if amx_available() {
            Some(Bf16Kernel::Amx)
        } else if avx512_bf16_available() {
            Some(Bf16Kernel::Avx512Bf16)
        } else {
            None
        }
    })
}

fn avx512_bf16_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether this CPU has AMX-TILE and AMX-BF16 and the OS lets this process use them (asked
/// once; the answer is kept). Linux grants the tile state only on request (`arch_prctl`),
/// made here.
pub fn amx_available() -> bool {
    static AMX: OnceLock<bool> = OnceLock::new();
    *AMX.get_or_init(detect_amx)
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn detect_amx() -> bool {
    use std::arch::x86_64::{__cpuid, __cpuid_count};
    if !std::arch::is_x86_feature_detected!("avx512f") {
        return false;
    }
    // Leaf 7 is read only when the CPU has it.
    let max_leaf = __cpuid(0).eax;
    let edx = if max_leaf >= 7 {
        __cpuid_count(7, 0).edx
    } else {
        0
    };
    let (amx_bf16, amx_tile) = ((edx >> 22) & 1 == 1, (edx >> 24) & 1 == 1);
    if max_leaf < 7 || !amx_bf16 || !amx_tile {
        return false;
    }
    // Linux's ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (arch/x86/include/uapi/asm/prctl.h).
    const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: libc::c_long = 18;
    // SAFETY: this arch_prctl only asks for a permission of this process; no memory is passed.
    let granted = unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        )
    } == 0;
    if !granted {
        tracing::debug!("the CPU has AMX-BF16 but the kernel did not grant the tile state");
    }
    granted
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn detect_amx() -> bool {
    false
}

/// `v` rounded to bf16 (nearest, ties to even); NaN stays a (quiet) NaN, ±∞ stays ±∞, and
/// finite values past bf16's largest round to ±∞ as IEEE rounding does.
#[inline(always)]
pub fn f32_to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let lsb = (bits >> 16) & 1;
    (bits.wrapping_add(0x7fff + lsb) >> 16) as u16
}

/// The f32 a bf16 value stands for (exact).
#[inline(always)]
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// A strided f32 matrix: element `(i, j)` at `offset + i · row_stride + j · col_stride`.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    offset: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// The view, or `None` when an element would lie outside `data`.
    pub fn new(
        data: &'a [f32],
        (rows, cols): (usize, usize),
        offset: usize,
        (row_stride, col_stride): (usize, usize),
    ) -> Option<Self> {
        let last = if rows == 0 || cols == 0 {
            offset
        } else {
            offset + (rows - 1) * row_stride + (cols - 1) * col_stride
        };
        (rows == 0 || cols == 0 || last < data.len()).then_some(Self {
            data,
            rows,
            cols,
            offset,
            row_stride,
            col_stride,
        })
    }

    /// A row-major `[rows, cols]` matrix.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Option<Self> {
        (data.len() == rows * cols).then(|| Self::new(data, (rows, cols), 0, (cols, 1)))?
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The transposed view (no copy).
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    #[cfg(test)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[self.offset + i * self.row_stride + j * self.col_stride]
    }
}

/// Rows of C per block, K per step, columns per block.
const BLOCK: usize = 32;
/// K per pass over a chunk's rows (a multiple of [`BLOCK`]).
const KC: usize = 512;

/// `a · b` as a row-major `[m, n]` f32 matrix, both operands rounded to bf16.
///
/// # Shapes
/// - `a`: `[m, k]`, `b`: `[k, n]` (any strides); output: `[m, n]` row-major
///
/// # Panics
/// When `a`'s columns differ from `b`'s rows, or `kernel` is not one [`kernel`] returned.
pub fn matmul(a: MatRef<'_>, b: MatRef<'_>, kernel: Bf16Kernel) -> Vec<f32> {
    assert_eq!(a.cols, b.rows, "bf16 matmul: inner dimensions differ");
    assert!(
        self::kernel() == Some(kernel)
            || (kernel == Bf16Kernel::Avx512Bf16 && avx512_bf16_available()),
        "bf16 matmul: this CPU cannot run {kernel:?}"
    );
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return Vec::new();
    }
    let (mp, kp, np) = (
        m.next_multiple_of(BLOCK),
        k.max(1).next_multiple_of(BLOCK),
        n.next_multiple_of(BLOCK),
    );
    let (mut pa, mut pb) = SCRATCH.with_borrow_mut(std::mem::take);
    pack_a(a, mp, kp, scratch(&mut pa, mp * kp, m < mp || k < kp));
    pack_b(b, kp, np, scratch(&mut pb, np * kp, n < np || k < kp));
    let mut c = vec![0f32; mp * np];
    // K in blocks of KC: a block of a chunk's rows (at most 256 KiB of bf16) stays in L2 and a
    // 32-column slice of B (32 KiB) in L1 while the column blocks pass; the chunks are at
    // least as many as the threads.
    let kc = KC.min(kp);
    let threads = rayon::current_num_threads().max(1);
    let chunk_rows = ((256 * 1024 / (2 * kc)) / BLOCK * BLOCK)
        .clamp(BLOCK, 8 * BLOCK)
        .min(mp.div_ceil(threads).next_multiple_of(BLOCK));
    c.par_chunks_mut(chunk_rows * np)
        .zip(pa.par_chunks(chunk_rows * kp))
        .for_each(|(c, a)| {
            let rows = a.len() / kp;
            for k0 in (0..kp).step_by(kc) {
                let ks = k0..(k0 + kc).min(kp);
                match kernel {
                    // SAFETY: `kernel()` (checked above) found AMX with its OS permission and
                    // AVX-512F; the buffers have the block-padded sizes the kernels read.
                    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
                    Bf16Kernel::Amx => unsafe { amx::chunk(a, &pb, rows, kp, np, ks, c) },
                    // SAFETY: AVX512-BF16 checked above; padded sizes as for AMX.
                    #[cfg(target_arch = "x86_64")]
                    Bf16Kernel::Avx512Bf16 => unsafe { dp::chunk(a, &pb, rows, kp, np, ks, c) },
                    #[allow(unreachable_patterns)]
                    _ => unreachable!("no bf16 kernel on this target"),
                }
            }
        });
    SCRATCH.with_borrow_mut(|s| *s = (pa, pb));
    if n == np {
        c.truncate(m * n);
        c
    } else {
        let mut out = Vec::with_capacity(m * n);
        for row in c.chunks_exact(np).take(m) {
            out.extend_from_slice(&row[..n]);
        }
        out
    }
}

/// Rows of a transposed A, or columns of B (four panels), per packing task.
const TILE: usize = 64;
/// Columns of a row-major B per packing task (16 panels): each source row is read in spans of
/// 1 KiB.
const B_SPAN: usize = 256;

thread_local! {
    /// The packed operands of the calling thread's last product, kept so that the next one
    /// writes memory that is already mapped (a fresh buffer of megabytes costs a page fault per
    /// 4 KiB on first touch).
    static SCRATCH: std::cell::RefCell<(Vec<u16>, Vec<u16>)> = Default::default();
}

/// `buf` as `len` values, zero where the packing leaves padding (`padded`); its other values
/// are overwritten by the packing.
fn scratch(buf: &mut Vec<u16>, len: usize, padded: bool) -> &mut [u16] {
    buf.resize(len, 0);
    if padded {
        buf.fill(0);
    }
    buf
}

/// `a` as bf16 rows `[mp, kp]` into `out`, whose padding is zero.
fn pack_a(a: MatRef<'_>, mp: usize, kp: usize, out: &mut [u16]) {
    debug_assert_eq!(out.len(), mp * kp);
    if a.col_stride == 1 {
        out.par_chunks_mut(kp)
            .take(a.rows)
            .enumerate()
            .for_each(|(i, row)| {
                let start = a.offset + i * a.row_stride;
                let src = &a.data[start..start + a.cols];
                with_avx512(|| convert(src, &mut row[..a.cols]));
            });
        return;
    }
    // Strided rows (a transposed view): TILE rows per task, in tiles of TILE rows × 32 columns
    // gathered on the stack, so that each source line is read as TILE contiguous values (one
    // page visit per TILE rows: a matrix of tokens × width spans thousands of pages) and each
    // packed row is written 64 bytes at a time.
    out.par_chunks_mut(TILE * kp)
        .enumerate()
        .for_each(|(blk, rows)| {
            let i0 = blk * TILE;
            let height = TILE.min(a.rows.saturating_sub(i0));
            if height == 0 {
                return;
            }
            with_avx512(|| {
                // tile[jj][r]: source column j0 + jj of rows i0 + r, converted.
                let mut tile = [[0u16; TILE]; 32];
                for j0 in (0..a.cols).step_by(32) {
                    let width = 32.min(a.cols - j0);
                    for (jj, t) in tile.iter_mut().enumerate().take(width) {
                        let at = a.offset + i0 * a.row_stride + (j0 + jj) * a.col_stride;
                        if a.row_stride == 1 {
                            convert(&a.data[at..at + height], &mut t[..height]);
                        } else {
                            for (r, d) in t.iter_mut().enumerate().take(height) {
                                *d = f32_to_bf16(a.data[at + r * a.row_stride]);
                            }
                        }
                    }
                    for r in 0..height {
                        let row = &mut rows[r * kp + j0..r * kp + j0 + width];
                        for (d, t) in row.iter_mut().zip(&tile) {
                            *d = t[r];
                        }
                    }
                }
            });
        });
}

/// `b` in K-pairs per 16 columns, `[np / 16][kp / 2][16][2]`, into `out`, whose padding is
/// zero.
fn pack_b(b: MatRef<'_>, kp: usize, np: usize, out: &mut [u16]) {
    debug_assert_eq!(out.len(), np * kp);
    // A task packs `span` columns (span / 16 panels).
    let span = if b.col_stride == 1 { B_SPAN } else { TILE };
    out.par_chunks_mut(span * kp)
        .enumerate()
        .for_each(|(group, panels)| {
            let j0 = group * span;
            let width = span.min(b.cols.saturating_sub(j0));
            if width == 0 {
                return;
            }
            with_avx512(|| {
                if b.col_stride == 1 {
                    // Rows contiguous: each pair of K-rows, 16 columns at a time, becomes one
                    // 64-byte line of a panel.
                    let row = |kk: usize| {
                        let at = b.offset + kk * b.row_stride + j0;
                        &b.data[at..at + width]
                    };
                    for p in 0..b.rows.div_ceil(2) {
                        let (r0, r1) = (row(2 * p), (2 * p + 1 < b.rows).then(|| row(2 * p + 1)));
                        for c0 in (0..width).step_by(16) {
                            let w = 16.min(width - c0);
                            let line = &mut panels[(c0 / 16) * 16 * kp + p * 32..][..32];
                            interleave(&r0[c0..c0 + w], r1.map(|r| &r[c0..c0 + w]), line);
                        }
                    }
                } else {
                    // Columns contiguous (a transposed row-major matrix), or any other strides.
                    for c in 0..width {
                        let panel = &mut panels[(c / 16) * 16 * kp..];
                        let at = b.offset + (j0 + c) * b.col_stride;
                        for kk in 0..b.rows {
                            let v = b.data[at + kk * b.row_stride];
                            panel[(kk / 2) * 32 + (c % 16) * 2 + (kk & 1)] = f32_to_bf16(v);
                        }
                    }
                }
            });
        });
}

/// `line[2c] = bf16(r0[c])`, `line[2c + 1] = bf16(r1[c])` (0 without `r1`), for the `c`
/// of `r0` (at most 16); the rest of the 32-value line is left as it is.
#[inline(always)]
fn interleave(r0: &[f32], r1: Option<&[f32]>, line: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if r0.len() == 16 && avx512_bf16_available() {
        // SAFETY: AVX-512F and AVX512-BF16 checked just above (AVX512-BW comes with both on
        // every CPU that has AVX512-BF16); 16 values per row, 32 in `line`.
        unsafe { interleave_avx512(r0, r1, line) };
        return;
    }
    for (c, &v) in r0.iter().enumerate() {
        line[2 * c] = f32_to_bf16(v);
        line[2 * c + 1] = r1.map_or(0, |r| f32_to_bf16(r[c]));
    }
}

/// [`interleave`] of 16 columns with `VCVTNE2PS2BF16` and one word permutation.
///
/// # Safety
/// The CPU must have AVX-512F/BW and AVX512-BF16; `r0` (and `r1`) hold 16 values, `line` 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
unsafe fn interleave_avx512(r0: &[f32], r1: Option<&[f32]>, line: &mut [u16]) {
    use std::arch::x86_64::*;
    debug_assert!(r0.len() == 16 && line.len() >= 32);
    // Word i of the result takes word IDX[i] of [bf16(r0) | bf16(r1)].
    const IDX: [i16; 32] = {
        let mut idx = [0i16; 32];
        let mut c = 0;
        while c < 16 {
            idx[2 * c] = c as i16;
            idx[2 * c + 1] = 16 + c as i16;
            c += 1;
        }
        idx
    };
    // SAFETY: 16 floats are read from each row and 32 words written to `line` (the contract).
    unsafe {
        let a = _mm512_loadu_ps(r0.as_ptr());
        let b = match r1 {
            Some(r) => _mm512_loadu_ps(r.as_ptr()),
            None => _mm512_setzero_ps(),
        };
        let words: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(b, a));
        let idx = _mm512_loadu_si512(IDX.as_ptr() as *const __m512i);
        let out = _mm512_permutexvar_epi16(idx, words);
        _mm512_storeu_si512(line.as_mut_ptr() as *mut __m512i, out);
    }
}

/// `dst[i] = bf16(src[i])`.
#[inline(always)]
fn convert(src: &[f32], dst: &mut [u16]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = f32_to_bf16(v);
    }
}

/// Runs `f` compiled for AVX-512 when the CPU has it (the conversions vectorise).
#[inline(always)]
fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn wide<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, checked just above.
            return unsafe { wide(f) };
        }
    }
    f()
}

/// The 64-byte operand of AMX's `LDTILECFG` (palette 1): tiles 0–7, each 64 bytes wide, with
/// the given rows.
#[repr(C, align(64))]
#[derive(Debug, Clone)]
pub struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    /// Bytes per row of each tile.
    colsb: [u16; 16],
    /// Rows of each tile.
    rows: [u8; 16],
}

impl TileConfig {
    /// Tiles 0–7 of `rows[t]` rows (at most 16) and 64 bytes per row; the other tiles unused.
    pub fn new(rows: [u8; 8]) -> Self {
        let mut c = Self {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        for (t, &r) in rows.iter().enumerate() {
            c.colsb[t] = 64;
            c.rows[t] = r.min(16);
        }
        c
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod amx {
    use std::arch::asm;
    use std::ops::Range;

    use super::TileConfig;

    /// `c = a[.., ks] · b[ks, ..]` for one chunk of `rows` rows (a multiple of 32), added to
    /// `c` unless `ks` starts at 0.
    ///
    /// ```text
    /// tmm0..3  C: rows 0–15 / 16–31 × columns 0–15 / 16–31 of the block
    /// tmm4, 5  A: rows 0–15 and 16–31, 32 K values each
    /// tmm6, 7  B: the block's two 16-column halves, 16 K-pairs each
    /// ```
    ///
    /// # Safety
    /// AMX-BF16 must be usable by this process (`super::amx_available`); `a` holds
    /// `rows · kp` values, `b` `np · kp`, `c` `rows · np`; `rows`, `kp`, `np` and the ends of
    /// `ks` (within `0..=kp`) are multiples of 32.
    pub(super) unsafe fn chunk(
        a: &[u16],
        b: &[u16],
        rows: usize,
        kp: usize,
        np: usize,
        ks: Range<usize>,
        c: &mut [f32],
    ) {
        debug_assert!(a.len() >= rows * kp && b.len() >= np * kp && c.len() >= rows * np);
        let config = TileConfig::new([16; 8]);
        let a_stride = kp * 2;
        let b_stride = 64usize;
        let c_stride = np * 4;
        // SAFETY (whole block): every tile load reads 16 lines inside `a` (rows r0..r0 + 32,
        // K block kb) or inside `b` (16 K-pairs of one 16-column panel); every store writes 16
        // rows × 16 floats inside `c`; the tiles were configured first and are released last.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) &config, options(nostack, preserves_flags));
            for cb in (0..np).step_by(32) {
                let b0 = b.as_ptr().add((cb / 16) * 16 * kp);
                let b1 = b0.add(16 * kp);
                for r0 in (0..rows).step_by(32) {
                    let c0 = c.as_mut_ptr().add(r0 * np + cb);
                    if ks.start == 0 {
                        asm!(
                            "tilezero tmm0",
                            "tilezero tmm1",
                            "tilezero tmm2",
                            "tilezero tmm3",
                            options(nostack, preserves_flags)
                        );
                    } else {
                        asm!(
                            "tileloadd tmm0, [{c0} + {s}*1]",
                            "tileloadd tmm1, [{c1} + {s}*1]",
                            "tileloadd tmm2, [{c2} + {s}*1]",
                            "tileloadd tmm3, [{c3} + {s}*1]",
                            c0 = in(reg) c0,
                            c1 = in(reg) c0.add(16),
                            c2 = in(reg) c0.add(16 * np),
                            c3 = in(reg) c0.add(16 * np + 16),
                            s = in(reg) c_stride,
                            options(nostack, preserves_flags, readonly)
                        );
                    }
                    let a0 = a.as_ptr().add(r0 * kp);
                    let a1 = a0.add(16 * kp);
                    for kb in ks.start / 32..ks.end / 32 {
                        asm!(
                            "tileloadd tmm4, [{a0} + {sa}*1]",
                            "tileloadd tmm5, [{a1} + {sa}*1]",
                            "tileloadd tmm6, [{b0} + {sb}*1]",
                            "tileloadd tmm7, [{b1} + {sb}*1]",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            a0 = in(reg) a0.add(kb * 32),
                            a1 = in(reg) a1.add(kb * 32),
                            b0 = in(reg) b0.add(kb * 512),
                            b1 = in(reg) b1.add(kb * 512),
                            sa = in(reg) a_stride,
                            sb = in(reg) b_stride,
                            options(nostack, preserves_flags, readonly)
                        );
                    }
                    asm!(
                        "tilestored [{c0} + {s}*1], tmm0",
                        "tilestored [{c1} + {s}*1], tmm1",
                        "tilestored [{c2} + {s}*1], tmm2",
                        "tilestored [{c3} + {s}*1], tmm3",
                        c0 = in(reg) c0,
                        c1 = in(reg) c0.add(16),
                        c2 = in(reg) c0.add(16 * np),
                        c3 = in(reg) c0.add(16 * np + 16),
                        s = in(reg) c_stride,
                        options(nostack, preserves_flags)
                    );
                }
            }
            asm!("tilerelease", options(nostack, preserves_flags));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod dp {
    use std::arch::x86_64::*;
    use std::ops::Range;

    /// Rows of C per register block.
    const MR: usize = 8;

    /// `c = a[.., ks] · b[ks, ..]` for one chunk of `rows` rows (a multiple of 32) with
    /// `VDPBF16PS`, added to `c` unless `ks` starts at 0.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX512-BF16; `a` holds `rows · kp` values, `b` `np · kp`,
    /// `c` `rows · np`; `rows`, `kp`, `np` and the ends of `ks` are multiples of 32.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) unsafe fn chunk(
        a: &[u16],
        b: &[u16],
        rows: usize,
        kp: usize,
        np: usize,
        ks: Range<usize>,
        c: &mut [f32],
    ) {
        debug_assert!(a.len() >= rows * kp && b.len() >= np * kp && c.len() >= rows * np);
        let pairs = kp / 2;
        for cb in (0..np).step_by(32) {
            let b0 = b[(cb / 16) * 16 * kp..].as_ptr() as *const __m512i;
            let b1 = b[(cb / 16 + 1) * 16 * kp..].as_ptr() as *const __m512i;
            for r0 in (0..rows).step_by(MR) {
                let mut acc = [[_mm512_setzero_ps(); 2]; MR];
                if ks.start > 0 {
                    for (r, acc_r) in acc.iter_mut().enumerate() {
                        let at = &c[(r0 + r) * np + cb..(r0 + r) * np + cb + 32];
                        // SAFETY: `at` holds 32 floats.
                        unsafe {
                            acc_r[0] = _mm512_loadu_ps(at.as_ptr());
                            acc_r[1] = _mm512_loadu_ps(at.as_ptr().add(16));
                        }
                    }
                }
                let x = a[r0 * kp..].as_ptr() as *const u32;
                for p in ks.start / 2..ks.end / 2 {
                    // SAFETY: p < kp / 2, so both panels' line p and every row's pair p lie
                    // inside `b` and `a` (sizes per the contract).
                    unsafe {
                        let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(b0.add(p)));
                        let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(b1.add(p)));
                        for (r, acc_r) in acc.iter_mut().enumerate() {
                            let xv: __m512bh = std::mem::transmute(_mm512_set1_epi32(
                                x.add(r * pairs + p).read_unaligned() as i32,
                            ));
                            acc_r[0] = _mm512_dpbf16_ps(acc_r[0], xv, w0);
                            acc_r[1] = _mm512_dpbf16_ps(acc_r[1], xv, w1);
                        }
                    }
                }
                for (r, acc_r) in acc.iter().enumerate() {
                    let out = &mut c[(r0 + r) * np + cb..(r0 + r) * np + cb + 32];
                    // SAFETY: `out` holds 32 floats.
                    unsafe {
                        _mm512_storeu_ps(out.as_mut_ptr(), acc_r[0]);
                        _mm512_storeu_ps(out.as_mut_ptr().add(16), acc_r[1]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    /// `a · b` in f64 over the bf16-rounded operands: what both kernels must give up to f32
    /// summation.
    fn reference(a: MatRef<'_>, b: MatRef<'_>) -> Vec<f64> {
        let r = |v: f32| f64::from(bf16_to_f32(f32_to_bf16(v)));
        let mut out = vec![0f64; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                out[i * b.cols + j] = (0..a.cols).map(|k| r(a.at(i, k)) * r(b.at(k, j))).sum();
            }
        }
        out
    }

    fn kernels() -> Vec<Bf16Kernel> {
        let mut out = Vec::new();
        if amx_available() {
            out.push(Bf16Kernel::Amx);
        }
        if avx512_bf16_available() {
            out.push(Bf16Kernel::Avx512Bf16);
        }
        out
    }

    #[test]
    fn products_equal_the_rounded_operands_product_at_every_shape_and_layout() {
        if kernels().is_empty() {
            eprintln!("skipped: this CPU has neither AMX-BF16 nor AVX512-BF16");
            return;
        }
        // Shapes off every block boundary, and transposed views of either operand.
        for (m, k, n) in [
            (1, 1, 1),
            (37, 70, 45),
            (64, 96, 32),
            (300, 33, 17),
            (5, 200, 130),
        ] {
            let a_rm = values(m * k, 1);
            let a_cm = values(m * k, 2);
            let b_rm = values(k * n, 3);
            let b_cm = values(k * n, 4);
            let a_views = [
                MatRef::row_major(&a_rm, m, k).expect("a"),
                MatRef::row_major(&a_cm, k, m).expect("aᵀ").t(),
            ];
            let b_views = [
                MatRef::row_major(&b_rm, k, n).expect("b"),
                MatRef::row_major(&b_cm, n, k).expect("bᵀ").t(),
            ];
            for kernel in kernels() {
                for a in a_views {
                    for b in b_views {
                        let got = matmul(a, b, kernel);
                        let want = reference(a, b);
                        assert_eq!(got.len(), m * n);
                        for (g, w) in got.iter().zip(&want) {
                            assert!(
                                (f64::from(*g) - w).abs() < 1e-5 * (k as f64).sqrt(),
                                "{kernel:?} {m}×{k}×{n}: {g} against {w}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rounding_is_to_nearest_even_and_keeps_specials() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // 1 + 2⁻⁸ lies halfway between 1 and 1 + 2⁻⁷: ties to the even (1.0).
        assert_eq!(f32_to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 / 256.0), 0x3f82);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(bf16_to_f32(f32_to_bf16(f32::INFINITY)), f32::INFINITY);
    }

    #[test]
    fn views_outside_their_data_are_refused() {
        let data = [0f32; 6];
        assert!(MatRef::row_major(&data, 2, 3).is_some());
        assert!(MatRef::row_major(&data, 3, 3).is_none());
        assert!(MatRef::new(&data, (2, 3), 1, (3, 1)).is_none());
    }
}
