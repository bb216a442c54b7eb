//! Small-M matrix products `y = x · W + b` for `x: [M, K]`, `W: [K, N]`, the shape of every
//! decoding step (M = the new tokens of a step, 1 to ~16), that read each weight once for all M
//! rows and split the work over the threads by output columns.
//!
//! The weight is packed once, at load, into column panels of [`NR`] = 32 columns, each panel
//! `[K][NR]` contiguous, so a thread streams one contiguous stretch of memory (its panels) from
//! start to end:
//!
//! ```text
//! W [K, N] row-major            packed: panel p = columns p·32 .. p·32+32, K rows of 32 floats
//! ┌────┬────┬────┬──┐           [ panel 0 (K × 32) | panel 1 (K × 32) | … | last, zero-padded ]
//! │ p0 │ p1 │ p2 │p3│             thread 0: panels 0 .. P/2      thread 1: panels P/2 .. P
//! └────┴────┴────┴──┘
//! ```
//!
//! Within a panel a micro-kernel keeps `rows × 32` accumulators in registers and walks K once,
//! broadcasting `x[r, k]` against the panel's row `k`; more rows than the kernel holds run in
//! chunks over the same panel, which then comes from L1/L2, not memory. So an M-row product
//! costs one pass over the weights plus M times the (cheap, in-register) arithmetic, and prefill
//! (large M) is a cache-blocked GEMM by the same code.
//!
//! Kernels are chosen at run time ([`Kernel::detect`]): AVX-512F (8 rows × 2 zmm), AVX2 + FMA
//! (3 rows × 4 ymm), and a portable one the compiler vectorises; each is tested against the
//! portable one. Where the CPU has AMX-BF16, bf16 products of 12 rows or more run on its tiles
//! (`amx`, [`Kernel::Amx`]).
//!
//! Weights are stored in f32, bf16 or int8 ([`WeightFormat`]; the [`bf16`] and `int8`
//! modules): bf16 halves the bytes a product reads, int8 (weight-only, one scale per output
//! column) quarters them; their kernels widen the weights to f32 in registers.

mod amx;
pub mod bf16;
mod int8;
mod strided;

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::OnceLock;

use self::bf16::Bf16Row;
use self::int8::Int8Weights;
use crate::error::{EngineError, Result};
use crate::team;
use crate::vmath::swiglu_interleaved;

/// The environment variable that caps [`Kernel::detect`] (`amx`, `avx512`, `avx2`,
/// `portable`).
pub const KERNEL_ENV: &str = "VOXSPEC_KERNEL";

/// Columns per packed panel.
pub const NR: usize = 32;
/// Most rows any micro-kernel holds at once.
const MAX_MR: usize = 8;
/// A product is split over the engine's threads ([`crate::team`]) when its work `M · K · N` is
/// at least this many multiply-adds (about 2 µs on one core); below it the handoff costs more
/// than the half it saves. Measured on the main job's model (bf16, `bench forward`, two
/// interleaved runs, ms at k = 1 / 8): 2¹⁴ 0.445 / 0.887 and 0.457 / 0.941, 2¹⁶ 0.438 / 0.896
/// and 0.418 / 0.868, 2¹⁸ 0.479 / 0.886 and 0.476 / 0.873. More tasks than threads (dynamic
/// claiming, for balance) measured no better, and worse for prefill on AMX tiles (each task
/// converts the activations again).
const PARALLEL_MIN_WORK: usize = 1 << 16;

/// A micro-kernel family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512F, and AMX-BF16 tiles for bf16 weights at 12 rows or more (`amx::MIN_ROWS`)
    /// (Intel Sapphire Rapids and later, Linux): every other product runs the AVX-512 kernels.
    Amx,
    /// AVX-512F: up to 8 rows × 32 columns in 16 zmm accumulators.
    Avx512,
    /// AVX2 + FMA: up to 3 rows × 32 columns in 12 ymm accumulators.
    Avx2,
    /// Plain Rust over `[f32; 32]` rows (whatever the compile target vectorises).
    Portable,
}

impl Kernel {
    /// Every kernel, best first.
    pub const ALL: [Kernel; 4] = [Kernel::Amx, Kernel::Avx512, Kernel::Avx2, Kernel::Portable];

    /// The best kernel this CPU runs, detected once; the environment variable
    /// [`KERNEL_ENV`] (`amx`, `avx512`, `avx2` or `portable`) caps it, to compare kernels on
    /// one machine (a kernel the CPU lacks, or an unknown name, is reported and ignored).
    pub fn detect() -> Kernel {
        static KERNEL: OnceLock<Kernel> = OnceLock::new();
        *KERNEL.get_or_init(|| {
            let mut best = Kernel::available()[0];
            if let Ok(name) = std::env::var(KERNEL_ENV) {
                match Kernel::ALL.into_iter().find(|k| k.name() == name.trim()) {
                    Some(cap) if cap.supported() => {
                        let rank = |k: Kernel| Kernel::ALL.iter().position(|&a| a == k);
                        if rank(cap) > rank(best) {
                            best = cap;
                        }
                    }
                    _ => tracing::warn!(
                        "{KERNEL_ENV}={name}: not one of amx, avx512, avx2, portable that this CPU \
                         runs; using {}",
                        best.name()
                    ),
                }
            }
            tracing::debug!(?best, "native engine matmul kernel");
            best
        })
    }

    /// The kernel's name, as [`KERNEL_ENV`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Amx => "amx",
            Kernel::Avx512 => "avx512",
            Kernel::Avx2 => "avx2",
            Kernel::Portable => "portable",
        }
    }

    /// Every kernel this CPU runs, best first (the portable one always last).
    pub fn available() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.supported()).collect()
    }

    /// The kernel that runs the widening (f32-arithmetic) products: AMX's is AVX-512.
    pub(crate) fn widening(self) -> Kernel {
        match self {
            Kernel::Amx => Kernel::Avx512,
            k => k,
        }
    }

    /// Whether this CPU runs the kernel.
    pub fn supported(self) -> bool {
        match self {
            Kernel::Amx => Kernel::Avx512.supported() && amx::available(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => is_x86_feature_detected!("avx512f"),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Avx512 | Kernel::Avx2 => false,
            Kernel::Portable => true,
        }
    }

    /// Rows the micro-kernel holds in registers.
    pub(crate) fn max_rows(self) -> usize {
        match self {
            Kernel::Amx | Kernel::Avx512 => 8,
            Kernel::Avx2 => 3,
            Kernel::Portable => 4,
        }
    }

    /// `out[r] = Σ_k x[r·k_len + k] · w[k·NR ..][..NR]` for `rows ≤ max_rows()` rows.
    pub(crate) fn run(
        self,
        rows: usize,
        x: &[f32],
        k_len: usize,
        w: &[f32],
        out: &mut [[f32; NR]],
    ) {
        debug_assert!(rows <= self.max_rows() && rows <= out.len());
        debug_assert!(x.len() >= rows * k_len && w.len() >= k_len * NR);
        match self.widening() {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                // SAFETY: `Avx512` is only chosen when the CPU has AVX-512F (`available`), and
                // the slices hold `rows · k_len` and `k_len · NR` values (asserted above).
                unsafe {
                    match rows {
                        // One row streams the weight once with two FMAs per 128 bytes: the AVX2
                        // kernel measured 5–15 % faster from memory (examples/small_m.rs), the
                        // same from L3. AVX-512F CPUs have AVX2 and FMA.
                        1 if Kernel::Avx2.supported() => x86::panel_avx2::<1>(x, k_len, w, out),
                        1 => x86::panel_avx512::<1, 4>(x, k_len, w, out),
                        2 => x86::panel_avx512::<2, 2>(x, k_len, w, out),
                        3 => x86::panel_avx512::<3, 1>(x, k_len, w, out),
                        4 => x86::panel_avx512::<4, 1>(x, k_len, w, out),
                        5 => x86::panel_avx512::<5, 1>(x, k_len, w, out),
                        6 => x86::panel_avx512::<6, 1>(x, k_len, w, out),
                        7 => x86::panel_avx512::<7, 1>(x, k_len, w, out),
                        _ => x86::panel_avx512::<8, 1>(x, k_len, w, out),
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                // SAFETY: `Avx2` is only chosen when the CPU has AVX2 and FMA; sizes as above.
                unsafe {
                    match rows {
                        1 => x86::panel_avx2::<1>(x, k_len, w, out),
                        2 => x86::panel_avx2::<2>(x, k_len, w, out),
                        _ => x86::panel_avx2::<3>(x, k_len, w, out),
                    }
                }
            }
            _ => panel_portable_rows(rows, x, k_len, w, out),
        }
    }
}

fn panel_portable_rows(rows: usize, x: &[f32], k_len: usize, w: &[f32], out: &mut [[f32; NR]]) {
    match rows {
        1 => panel_portable::<1>(x, k_len, w, out),
        2 => panel_portable::<2>(x, k_len, w, out),
        3 => panel_portable::<3>(x, k_len, w, out),
        _ => panel_portable::<4>(x, k_len, w, out),
    }
}

/// The portable micro-kernel: `MR` rows of `[f32; NR]` accumulators.
fn panel_portable<const MR: usize>(x: &[f32], k_len: usize, w: &[f32], out: &mut [[f32; NR]]) {
    let mut acc = [[0.0f32; NR]; MR];
    for (k, wr) in w.chunks_exact(NR).take(k_len).enumerate() {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let xv = x[r * k_len + k];
            for (a, &wv) in acc_r.iter_mut().zip(wr) {
                *a += xv * wv;
            }
        }
    }
    out[..MR].copy_from_slice(&acc);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::NR;

    /// Panel rows (128 bytes each) the AVX-512 kernel prefetches ahead of its loads.
    const PREFETCH: usize = 32;

    /// AVX-512 micro-kernel: `MR` rows × 32 columns in `2·MR·U` zmm accumulators, K unrolled
    /// `U` times with independent accumulators (for few rows the FMA latency, not the loads,
    /// would bound a single chain).
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `x` must hold `MR · k_len` values, `w` `k_len · NR`,
    /// `out` at least `MR` rows.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panel_avx512<const MR: usize, const U: usize>(
        x: &[f32],
        k_len: usize,
        w: &[f32],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let mut a = [[[_mm512_setzero_ps(); 2]; MR]; U];
        let main = k_len - k_len % U;
        let mut k = 0;
        while k < main {
            for (u, au) in a.iter_mut().enumerate() {
                // SAFETY: k + u < k_len, so (k + u)·NR + 32 ≤ w.len() and
                // r·k_len + k + u < x.len().
                unsafe {
                    // Two cache lines per row of the panel, PREFETCH rows ahead (past the end of
                    // the panel it touches the next panel, which this thread reads next).
                    let ahead = wp.wrapping_add((k + u + PREFETCH) * NR);
                    _mm_prefetch::<_MM_HINT_T0>(ahead as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16) as *const i8);
                    let w0 = _mm512_loadu_ps(wp.add((k + u) * NR));
                    let w1 = _mm512_loadu_ps(wp.add((k + u) * NR + 16));
                    for (r, ar) in au.iter_mut().enumerate() {
                        let xv = _mm512_set1_ps(*xp.add(r * k_len + k + u));
                        ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                        ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
                    }
                }
            }
            k += U;
        }
        for k in main..k_len {
            // SAFETY: as above.
            unsafe {
                let w0 = _mm512_loadu_ps(wp.add(k * NR));
                let w1 = _mm512_loadu_ps(wp.add(k * NR + 16));
                for (r, ar) in a[0].iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*xp.add(r * k_len + k));
                    ar[0] = _mm512_fmadd_ps(xv, w0, ar[0]);
                    ar[1] = _mm512_fmadd_ps(xv, w1, ar[1]);
                }
            }
        }
        for r in 0..MR {
            let (mut s0, mut s1) = (a[0][r][0], a[0][r][1]);
            for au in a.iter().skip(1) {
                s0 = _mm512_add_ps(s0, au[r][0]);
                s1 = _mm512_add_ps(s1, au[r][1]);
            }
            // SAFETY: out[r] has NR = 32 floats.
            unsafe {
                _mm512_storeu_ps(out[r].as_mut_ptr(), s0);
                _mm512_storeu_ps(out[r].as_mut_ptr().add(16), s1);
            }
        }
    }

    /// AVX2 + FMA micro-kernel: `MR` rows × 32 columns in `4·MR` ymm accumulators.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; sizes as for [`panel_avx512`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn panel_avx2<const MR: usize>(
        x: &[f32],
        k_len: usize,
        w: &[f32],
        out: &mut [[f32; NR]],
    ) {
        let xp = x.as_ptr();
        let wp = w.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); 4]; MR];
        for k in 0..k_len {
            // SAFETY: as in `panel_avx512`.
            unsafe {
                let mut xv = [_mm256_setzero_ps(); MR];
                for (r, x) in xv.iter_mut().enumerate() {
                    *x = _mm256_set1_ps(*xp.add(r * k_len + k));
                }
                for j in 0..4 {
                    let wv = _mm256_loadu_ps(wp.add(k * NR + 8 * j));
                    for (acc_r, &x) in acc.iter_mut().zip(&xv) {
                        acc_r[j] = _mm256_fmadd_ps(x, wv, acc_r[j]);
                    }
                }
            }
        }
        for (acc_r, out_r) in acc.iter().zip(out.iter_mut()) {
            for (j, &a) in acc_r.iter().enumerate() {
                // SAFETY: out_r has NR = 32 floats, j < 4.
                unsafe { _mm256_storeu_ps(out_r.as_mut_ptr().add(8 * j), a) };
            }
        }
    }
}

/// A raw output pointer shared by the threads of one product; each writes its own columns.
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: the threads of `PackedLinear::forward_with` write disjoint columns of the output.
unsafe impl Send for OutPtr {}
// SAFETY: as above.
unsafe impl Sync for OutPtr {}

/// How the weights of the engine's linear layers are stored. Biases, norms and embedding
/// tables stay f32 in either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// 4 bytes per weight, as trained.
    #[default]
    F32,
    /// 2 bytes per weight: bfloat16, rounded to nearest even at load; the products widen
    /// them to f32 and accumulate in f32.
    Bf16,
    /// 1 byte per weight: symmetric int8 with one f32 scale per output column
    /// (`max |w| / 127`), quantized at load; the products widen the weights to f32, accumulate
    /// in f32 and scale each output once. Activations stay f32 (weight-only).
    Int8,
}

impl WeightFormat {
    /// Every format, f32 first.
    pub const ALL: [WeightFormat; 3] = [WeightFormat::F32, WeightFormat::Bf16, WeightFormat::Int8];

    /// Bytes per stored weight.
    pub fn bytes_per_weight(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::Bf16 => 2,
            WeightFormat::Int8 => 1,
        }
    }

    /// The lower-case name (`f32`, `bf16`), as [`FromStr`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Int8 => "int8",
        }
    }
}

impl fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WeightFormat {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self> {
        WeightFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| EngineError::UnknownWeightFormat { name: s.into() })
    }
}

/// Packed weights, `[panels][K][NR]` either way, the last panel zero-padded.
#[derive(Debug, Clone)]
enum PackedWeights {
    F32(Vec<f32>),
    /// Per panel [`bf16::lines_per_panel`] cache lines, two per pair of K rows.
    Bf16(Vec<Bf16Row>),
    /// One 32-byte row per panel row and one scale per column.
    Int8(Int8Weights),
}

/// A linear layer `[K] → [N]` with its weight packed in column panels (see the module doc).
#[derive(Debug, Clone)]
pub struct PackedLinear {
    k: usize,
    n: usize,
    panels: usize,
    w: PackedWeights,
    /// `[N]`.
    bias: Option<Vec<f32>>,
}

impl PackedLinear {
    /// Packs `weight`, row-major `[k, n]` (Burn's `[in, out]` layout), and an optional `[n]`
    /// bias.
    ///
    /// # Errors
    /// [`EngineError::Model`] when the buffers do not have `k · n` and `n` values.
    pub fn new(weight: &[f32], k: usize, n: usize, bias: Option<Vec<f32>>) -> Result<Self> {
        if k == 0 || n == 0 || weight.len() != k * n {
            return Err(EngineError::Model {
                detail: format!(
                    "a linear weight of {} values is not [{k}, {n}] (both at least 1)",
                    weight.len()
                ),
            });
        }
        if let Some(b) = &bias
            && b.len() != n
        {
            return Err(EngineError::Model {
                detail: format!("a bias of {} values for {n} outputs", b.len()),
            });
        }
        let panels = n.div_ceil(NR);
        let mut w = vec![0.0f32; panels * k * NR];
        for p in 0..panels {
            let cols = NR.min(n - p * NR);
            for kk in 0..k {
                let src = &weight[kk * n + p * NR..kk * n + p * NR + cols];
                w[(p * k + kk) * NR..(p * k + kk) * NR + cols].copy_from_slice(src);
            }
        }
        Ok(Self {
            k,
            n,
            panels,
            w: PackedWeights::F32(w),
            bias,
        })
    }

    /// How the weight is stored.
    pub fn format(&self) -> WeightFormat {
        match self.w {
            PackedWeights::F32(_) => WeightFormat::F32,
            PackedWeights::Bf16(_) => WeightFormat::Bf16,
            PackedWeights::Int8(_) => WeightFormat::Int8,
        }
    }

    /// The layer with its weight stored as `format` (the bias stays f32). f32 → bf16 rounds
    /// each weight to nearest even, f32 → int8 quantizes each column; back to f32 is exact
    /// (the rounded values); bf16 ↔ int8 goes through f32.
    pub fn into_format(self, format: WeightFormat) -> Self {
        if self.format() == format {
            return self;
        }
        let f32_weights = match self.w {
            PackedWeights::F32(w) => w,
            PackedWeights::Bf16(w) => w
                .chunks_exact(bf16::lines_per_panel(self.k))
                .flat_map(|panel| bf16::unpack_panel(panel, self.k))
                .collect(),
            PackedWeights::Int8(w) => int8::dequantize(&w, self.k),
        };
        let w = match format {
            WeightFormat::F32 => PackedWeights::F32(f32_weights),
            WeightFormat::Bf16 => PackedWeights::Bf16(
                f32_weights
                    .chunks_exact(self.k * NR)
                    .flat_map(|panel| bf16::pack_panel(panel, self.k))
                    .collect(),
            ),
            WeightFormat::Int8 => PackedWeights::Int8(int8::quantize(&f32_weights, self.k)),
        };
        Self { w, ..self }
    }

    /// Input width K.
    pub fn in_features(&self) -> usize {
        self.k
    }

    /// Output width N.
    pub fn out_features(&self) -> usize {
        self.n
    }

    /// Weights and biases.
    pub fn num_params(&self) -> usize {
        self.k * self.n + self.bias.as_ref().map_or(0, Vec::len)
    }

    /// Bytes of weights read per product (the weight in its format, the f32 bias and, for
    /// int8, the f32 column scales).
    pub fn weight_bytes(&self) -> usize {
        let scales = match self.w {
            PackedWeights::Int8(_) => 4 * self.n,
            _ => 0,
        };
        self.format().bytes_per_weight() * self.k * self.n
            + 4 * self.bias.as_ref().map_or(0, Vec::len)
            + scales
    }

    /// `y = x · W + b` with the best kernel of this CPU.
    ///
    /// # Shapes
    /// - `x`: `[m, K]` row-major (at least `m · K` values)
    /// - `y`: `[m, N]` row-major (at least `m · N` values), overwritten
    pub fn forward(&self, x: &[f32], m: usize, y: &mut [f32]) {
        self.forward_with(Kernel::detect(), x, m, y);
    }

    /// [`forward`](Self::forward) with a given kernel (tests and benchmarks). A kernel this
    /// CPU lacks is replaced by the portable one.
    ///
    /// # Panics
    /// When `x` or `y` is shorter than the shapes say (an engine bug, never user input).
    pub fn forward_with(&self, kernel: Kernel, x: &[f32], m: usize, y: &mut [f32]) {
        self.split_forward(kernel, x, m, y, 1, None);
    }

    /// SwiGLU of this product, each task finishing its own columns: `act = silu(gate) · up`
    /// where the weight holds gate and up interleaved by panel (panel `2j` the gate's columns
    /// `32j ..`, panel `2j + 1` the up projection's same columns, as the engine's stacks pack
    /// a SwiGLU layer whose width is a multiple of 32).
    /// Saves the step a serial pass over `[m, 2·d_ff]` after the product.
    ///
    /// # Shapes
    /// - `x`: `[m, K]`
    /// - `y`: `[m, N]` scratch (the interleaved product), `N = 2·d_ff`
    /// - `act`: `[m, d_ff]`, overwritten
    ///
    /// # Panics
    /// When N is not a multiple of 2·[`NR`] or a buffer is short (engine bugs).
    pub fn forward_swiglu_with(
        &self,
        kernel: Kernel,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        act: &mut [f32],
    ) {
        let half = self.n / 2;
        assert!(
            self.n.is_multiple_of(2 * NR) && act.len() >= m * half,
            "swiglu product: N {} not a multiple of {} or act {} < {m}·{half}",
            self.n,
            2 * NR,
            act.len()
        );
        let (n, y_ptr, act_ptr) = (self.n, OutPtr(y.as_mut_ptr()), OutPtr(act.as_mut_ptr()));
        let epilogue = |panels: Range<usize>| {
            // The wrappers whole (a closure naming `.0` would capture the bare pointers).
            let (y_ptr, act_ptr) = (&y_ptr, &act_ptr);
            let cols = panels.len() * NR;
            for r in 0..m {
                // SAFETY: this task computed panels `panels` (a run of whole gate/up pairs) of
                // every row and no other task reads or writes them, nor the matching columns
                // of `act`; both buffers hold m rows (asserted).
                unsafe {
                    let gu =
                        std::slice::from_raw_parts(y_ptr.0.add(r * n + panels.start * NR), cols);
                    let a = std::slice::from_raw_parts_mut(
                        act_ptr.0.add(r * half + panels.start / 2 * NR),
                        cols / 2,
                    );
                    swiglu_interleaved(gu, NR, a);
                }
            }
        };
        self.split_forward(kernel, x, m, y, 2, Some(&epilogue));
    }

    /// [`forward_swiglu_with`](Self::forward_swiglu_with) with the best kernel of this CPU.
    pub fn forward_swiglu(&self, x: &[f32], m: usize, y: &mut [f32], act: &mut [f32]) {
        self.forward_swiglu_with(Kernel::detect(), x, m, y, act);
    }

    /// The product split over the team by runs of `align` panels, each task then calling
    /// `epilogue` with its panel range.
    fn split_forward(
        &self,
        kernel: Kernel,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        align: usize,
        epilogue: Option<&(dyn Fn(Range<usize>) + Sync)>,
    ) {
        assert!(
            x.len() >= m * self.k && y.len() >= m * self.n,
            "matmul buffers: x {} < {m}·{} or y {} < {m}·{}",
            x.len(),
            self.k,
            y.len(),
            self.n
        );
        if m == 0 {
            return;
        }
        let kernel = if kernel.supported() {
            kernel
        } else {
            Kernel::Portable
        };
        let threads = match rayon::current_num_threads() {
            1 => 1,
            threads => threads.min(team::helpers() + 1),
        };
        let units = self.panels.div_ceil(align);
        let tasks = if threads <= 1 || m * self.k * self.n < PARALLEL_MIN_WORK {
            1
        } else {
            threads.min(units)
        };
        let out = OutPtr(y.as_mut_ptr());
        let x = &x[..m * self.k];
        // `Kernel::Amx` is supported on x86_64 Linux only (`amx::available`).
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        let tiles = match &self.w {
            PackedWeights::Bf16(w) if kernel == Kernel::Amx && m >= amx::MIN_ROWS => Some(w),
            _ => None,
        };
        let run = |t: usize| {
            let (u0, u1) = (t * units / tasks, (t + 1) * units / tasks);
            let (p0, p1) = (u0 * align, (u1 * align).min(self.panels));
            #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
            if let Some(w) = tiles {
                let bias = self.bias.as_deref();
                // SAFETY: `Amx` is only kept when the CPU has AMX-BF16 and the OS allows it
                // (`supported`); panels p0..p1 write columns p0·NR .. min(p1·NR, N) of rows
                // 0..m only, disjoint between the tasks, and `y` holds m·N values (asserted).
                unsafe { amx::panels(x, m, self.k, self.n, w, bias, p0..p1, out) };
                if let Some(epilogue) = epilogue {
                    epilogue(p0..p1);
                }
                return;
            }
            for p in p0..p1 {
                // SAFETY: panel p writes columns p·NR .. p·NR + cols of rows 0..m only; the
                // panel ranges of the tasks are disjoint and `y` holds m·N values (asserted).
                unsafe { self.panel(kernel, p, x, m, out) };
            }
            if let Some(epilogue) = epilogue {
                epilogue(p0..p1);
            }
        };
        team::run(tasks, &run);
    }

    /// Computes columns `p·NR ..` of all `m` rows into `y`.
    ///
    /// # Safety
    /// `y` must point to `m · N` writable floats that no other thread writes in these columns.
    unsafe fn panel(&self, kernel: Kernel, p: usize, x: &[f32], m: usize, y: OutPtr) {
        let col0 = p * NR;
        let cols = NR.min(self.n - col0);
        let bias = self.bias.as_ref().map(|b| &b[col0..col0 + cols]);
        let mr = kernel.max_rows();
        let mut acc = [[0.0f32; NR]; MAX_MR];
        let mut r0 = 0;
        while r0 < m {
            let rows = mr.min(m - r0);
            let x = &x[r0 * self.k..];
            match &self.w {
                PackedWeights::F32(w) => {
                    let w = &w[p * self.k * NR..(p + 1) * self.k * NR];
                    kernel.run(rows, x, self.k, w, &mut acc);
                }
                PackedWeights::Bf16(w) => {
                    let lines = bf16::lines_per_panel(self.k);
                    let w = &w[p * lines..(p + 1) * lines];
                    kernel.run_bf16(rows, x, self.k, w, &mut acc);
                }
                PackedWeights::Int8(w) => {
                    let q = &w.rows[p * self.k..(p + 1) * self.k];
                    kernel.run_int8(rows, x, self.k, q, &mut acc);
                    let scales = &w.scales[p * NR..(p + 1) * NR];
                    for acc_r in acc.iter_mut().take(rows) {
                        for (a, &s) in acc_r.iter_mut().zip(scales) {
                            *a *= s;
                        }
                    }
                }
            }
            for (r, acc_r) in acc.iter().take(rows).enumerate() {
                // SAFETY: row r0 + r < m, columns col0 .. col0 + cols < N (see the caller).
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(y.0.add((r0 + r) * self.n + col0), cols)
                };
                match bias {
                    Some(b) => {
                        for ((d, &a), &bv) in dst.iter_mut().zip(acc_r).zip(b) {
                            *d = a + bv;
                        }
                    }
                    None => dst.copy_from_slice(&acc_r[..cols]),
                }
            }
            r0 += rows;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(super) fn values(len: usize, seed: u32) -> Vec<f32> {
        // A small LCG: deterministic, no dependency.
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    }

    pub(super) fn naive(
        x: &[f32],
        w: &[f32],
        b: Option<&[f32]>,
        m: usize,
        k: usize,
        n: usize,
    ) -> Vec<f32> {
        let mut y = vec![0.0f64; m * n];
        for r in 0..m {
            for kk in 0..k {
                for j in 0..n {
                    y[r * n + j] += f64::from(x[r * k + kk]) * f64::from(w[kk * n + j]);
                }
            }
            if let Some(b) = b {
                for j in 0..n {
                    y[r * n + j] += f64::from(b[j]);
                }
            }
        }
        y.into_iter().map(|v| v as f32).collect()
    }

    pub(crate) fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn portable_kernel_equals_the_naive_product() {
        for (m, k, n, bias) in [(1, 7, 5, false), (3, 64, 33, true), (17, 40, 96, true)] {
            let (x, w, b) = (values(m * k, 1), values(k * n, 2), values(n, 3));
            let b = bias.then_some(b);
            let lin = PackedLinear::new(&w, k, n, b.clone()).expect("shapes");
            let mut y = vec![f32::NAN; m * n];
            lin.forward_with(Kernel::Portable, &x, m, &mut y);
            let d = max_diff(&y, &naive(&x, &w, b.as_deref(), m, k, n));
            assert!(d < 1e-5, "m {m} k {k} n {n}: {d}");
        }
    }

    /// Every SIMD kernel this CPU has against the portable one, for every row count up to past
    /// two chunks, a ragged last panel, and both the one-thread and the split path.
    #[test]
    fn simd_kernels_equal_the_portable_one() {
        let kernels = Kernel::available();
        eprintln!("kernels on this CPU: {kernels:?}");
        for (k, n) in [(24, 70), (320, 400)] {
            let w = values(k * n, 4);
            let lin = PackedLinear::new(&w, k, n, Some(values(n, 5))).expect("shapes");
            for m in 1..=17 {
                let x = values(m * k, 6 + m as u32);
                let mut want = vec![0.0; m * n];
                lin.forward_with(Kernel::Portable, &x, m, &mut want);
                for &kernel in &kernels {
                    let mut got = vec![f32::NAN; m * n];
                    lin.forward_with(kernel, &x, m, &mut got);
                    let d = max_diff(&got, &want);
                    assert!(d < 1e-4, "{kernel:?} m {m} k {k} n {n}: {d}");
                }
            }
        }
    }

    /// The SwiGLU product (gate and up interleaved by panel, each task finishing its columns)
    /// against the plain product followed by SwiGLU, for every kernel and weight format, row
    /// counts through the AMX threshold, and both the one-task and the split path.
    #[test]
    fn the_swiglu_product_equals_product_then_swiglu() {
        for (k, d_ff) in [(24, 64), (320, 256)] {
            let n = 2 * d_ff;
            let w = values(k * n, 11);
            let bias = values(n, 12);
            for format in WeightFormat::ALL {
                let lin = PackedLinear::new(&w, k, n, Some(bias.clone()))
                    .expect("shapes")
                    .into_format(format);
                for m in [1, 2, 7, 8, 12, 17] {
                    let x = values(m * k, 13 + m as u32);
                    for &kernel in &Kernel::available() {
                        let mut y = vec![0.0; m * n];
                        lin.forward_with(kernel, &x, m, &mut y);
                        let mut want = vec![0.0; m * d_ff];
                        for (yr, wr) in y.chunks_exact(n).zip(want.chunks_exact_mut(d_ff)) {
                            for (j, o) in wr.iter_mut().enumerate() {
                                let (blk, c) = (j / NR, j % NR);
                                let (g, u) = (yr[2 * blk * NR + c], yr[(2 * blk + 1) * NR + c]);
                                *o = crate::vmath::silu(g) * u;
                            }
                        }
                        let mut scratch = vec![f32::NAN; m * n];
                        let mut got = vec![f32::NAN; m * d_ff];
                        lin.forward_swiglu_with(kernel, &x, m, &mut scratch, &mut got);
                        let d = max_diff(&got, &want);
                        assert!(
                            d == 0.0,
                            "{format:?} {kernel:?} m {m} k {k} d_ff {d_ff}: {d}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(PackedLinear::new(&[0.0; 6], 2, 4, None).is_err());
        assert!(PackedLinear::new(&[0.0; 8], 2, 4, Some(vec![0.0; 3])).is_err());
        assert!(PackedLinear::new(&[], 0, 4, None).is_err());
    }
}
