//! voxspec-engine: a native CPU inference engine for voxspec's AR model with MTP heads and its
//! NAR model: f32 arithmetic over f32, bf16 or int8 weights.
//!
//! - [`NativeMtp`]: the model built from a loaded Burn `voxspec_mtp::MtpModel` (parameters
//!   copied out once, linear weights packed in column panels) or from a model directory
//!   ([`NativeMtp::load`]); plain and aligned (phone-track) models, RMSNorm or LayerNorm,
//!   rotary or learned positions, SwiGLU or GELU, the Medusa-style MTP heads.
//! - It implements `voxspec_infer::LanguageModel` with [`NativeCache`]: a preallocated KV cache
//!   per layer, per-sequence lengths, O(1) truncate, ragged `extend` without padding, and
//!   scratch buffers reused from step to step.
//! - [`NativeMultiStream`]: the delayed multi-stream LM (`voxspec_multistream::MultiStreamModel`)
//!   on the same stack, as a `voxspec_infer::FrameModel` with [`NativeMsCache`], equal to
//!   `MsFrameLm` (prefill, k-column extend, O(1) truncate, the multi-token heads).
//! - [`NativeNar`]: the NAR model (code layers 2..N) on the same stack, bidirectional, one pass
//!   per layer.
//! - [`NativeMelSpeech`]: the renderer of the real voice — the mel decoder and its Vocos
//!   vocoder (`voxspec_codec::MelSpeech`) — on the same kernels, frame-major, with the inverse
//!   STFT by FFT ([`render`]); samples within 2e-4 of Burn's RMS on the shipped renderer (f32),
//!   1.2e-3 with bf16 weights on AMX tiles.
//! - [`matmul`]: small-M products (M ≤ 16 new tokens) that read each weight once for all rows,
//!   split over the cores by output columns ([`team`]: helper threads that spin between
//!   products, so a 5 µs product pays for the split), with AVX-512, AVX2 and portable micro-kernels
//!   chosen at run time, over f32, bf16 or int8 weights ([`WeightFormat`]); bf16 products of 12
//!   or more rows (prefill) run on AMX tiles where the CPU has AMX-BF16 ([`Kernel::Amx`]).
//!   `VOXSPEC_KERNEL=avx512|avx2|portable` caps the kernel detected, to compare them.
//! - bf16 weights: [`NativeMtp::from_burn_with`] / [`NativeNar::from_burn_with`] (and `load_with`)
//!   store every linear weight (transformer layers, MTP / NAR heads) as bfloat16, rounded to
//!   nearest even at load; embedding tables, norms, biases, the KV cache and all arithmetic stay
//!   f32. A step reads half the bytes. Tested in `tests/weight_format_parity.rs`: logits within
//!   4 % of the logits' standard deviation of the f32 engine (measured ≤ 1.15 %), greedy
//!   decoding token for token on the tiny preset, ≥ 98 % teacher-forced greedy agreement on the
//!   small preset (measured 99.4–100 %).
//! - int8 weights (`WeightFormat::Int8`, weight-only): every linear weight as symmetric int8
//!   with one f32 scale per output column (`max |w| / 127`), quantized at load; the kernels
//!   widen to f32 in registers and scale each output once, activations and arithmetic stay
//!   f32. A step reads a quarter of the bytes. Same tests: logits within 12 % of the logit
//!   standard deviation (measured ≤ 3.8 %), tiny-preset greedy decoding token for token, ≥ 95 %
//!   teacher-forced agreement on the small preset (measured 97.4–97.5 %); on the main job's
//!   trained model, 60 test sentences, AR identifies 90.0 % as with f32 weights (CER 60.6
//!   against 60.1).
//!
//! Parity with the Burn model (logits within 1e-4 — measured ≤ 1e-6 — for prefill, single-token
//! and ragged steps, after truncation; greedy AR and MTP decoding token for token) is tested in
//! `tests/parity.rs` for a plain, an aligned and a GPT-2-style model.
//!
//! # Measured (2-core AMD EPYC Zen 4, AVX-512, the machine shared with another job: ±20 % noise)
//!
//! Small-M products, µs per `[M, K] × [K, N]` cycled over a weight set past L3 (28 matrices of
//! 1024 × 1024, 117 MB) and one inside it (4 of 256 × 1024); `examples/small_m.rs`, one run. The
//! `gemm` crate 0.19 (what Burn's flex backend calls; `x86-v4` on) has a fast gemv for M = 1
//! but runs M ≥ 2 through its packed kernel, which costs 2–4x M = 1 before M = 8; the engine's
//! panel kernels read the weight once for all rows, so they are used for every M:
//!
//! | M | engine, 1024² from memory | gemm, 1024² (1 thread / 2) | engine, 256 × 1024 in L3 (1 thread) | gemm, 256 × 1024 (1 thread) |
//! |---|---|---|---|---|
//! | 1 | 148 | 240 / 384 | 13 | 14 |
//! | 2 | 188 | 422 / 500 | 16 | 25 |
//! | 4 | 206 | 458 / 492 | 20 | 23 |
//! | 8 | 223 | 657 / 717 | 38 | 52 |
//! | 16 | 403 | 771 / 825 | 76 | 79 |
//!
//! With rayon, a second thread paid only for weights that stream from memory (two threads read
//! ≈ 27 GB/s, one ≈ 20), so products with less than 4 MB of weights and little work stayed on
//! one thread; the spinning [`team`] (below, "Both cores for small products") splits every
//! product from 2¹⁶ multiply-adds.
//!
//! One cached forward over k new tokens at 200 cached positions (`voxspec bench forward
//! --engine burn,native`, ms, one run per model):
//!
//! | model | engine | k = 1 | k = 2 | k = 4 | k = 8 | cost(8)/cost(1) |
//! |---|---|---|---|---|---|---|
//! | main job's aligned AR (d 256, 4 layers, 6.7 M) | Burn | 0.891 | 1.356 | 1.717 | 2.413 | 2.71 |
//! | | native | 0.404 | 0.479 | 0.622 | 1.120 | 2.77 |
//! | base preset, random (d 1024, 12 layers, 203 M) | Burn | 37.0 | 77.1 | 89.9 | 132.3 | 3.57 |
//! | | native | 30.4 | 33.7 | 35.4 | 44.3 | 1.46 |
//!
//! The base model's one-token step reads 810 MB of f32 weights in 30.4 ms: 26.6 GB/s, 1.05x the
//! ≈ 29 ms floor at 28 GB/s. The small model lives in L3; its larger k cost is arithmetic and
//! attention on one core.
//!
//! ## f32 and bf16 weights
//!
//! One run per preset, random weights, 200 cached positions, ms per step (median of 30):
//! `voxspec bench forward --preset base --engine burn,native --weights f32,bf16 --max-k 8`, and
//! the same with `--preset small`. The machine was heavily shared during this run (load average
//! ≈ 6 on the 2 cores: three other builds), so everything is slower than in the table above
//! (native f32 base 46.6 against 30.4 ms) and the bandwidth the benchmark measured at its start
//! was 18.0 GB/s (base run) and 16.0 GB/s (small run), not 28; "x floor" is the k = 1 step over
//! the weights actually read (bf16: half the bytes) at that bandwidth.
//!
//! | preset | engine | weights | k = 1 | k = 2 | k = 4 | k = 8 | cost(8)/cost(1) | k = 1 x floor |
//! |---|---|---|---|---|---|---|---|---|
//! | base (d 1024, 12 layers, 16 heads, 203 M; 810 / 405 MB per step) | Burn | f32 | 81.1 | 138.6 | 152.7 | 216.1 | 2.67 | 1.81 |
//! | | native | f32 | 46.6 | 52.0 | 53.4 | 69.2 | 1.48 | 1.04 |
//! | | native | bf16 | 29.2 | 29.2 | 35.3 | 58.2 | 1.99 | 1.30 |
//! | | **bf16 speed-up** | | **1.60x** | **1.78x** | **1.51x** | **1.19x** | | |
//! | small (d 256, 4 layers, 4.7 M; 17.8 / 8.9 MB) | Burn | f32 | 1.575 | 2.569 | 2.492 | 3.829 | 2.43 | 1.41 |
//! | | native | f32 | 1.087 | 1.207 | 1.418 | 2.000 | 1.84 | 0.97 |
//! | | native | bf16 | 0.351 | 0.385 | 0.602 | 1.158 | 3.30 | 0.63 |
//! | | **bf16 speed-up** | | **3.10x** | **3.14x** | **2.36x** | **1.73x** | | |
//!
//! Interleaving the formats in one run to share the noise (`--preset base --engine native
//! --weights f32,bf16,f32,bf16,f32,bf16 --max-k 1 --repeat 50`): f32 49.5, 49.8, 45.4 ms, bf16
//! 30.8, 27.3, 28.2 ms, 1.68x on the sums. So under this load bf16 gives 1.6–1.8x per
//! one-token step of the base preset, short of the 2x the bytes allow. The products alone show
//! the same: one-row 1024² products cycled from memory (56 matrices, best of 40) take 128 µs for
//! 2 MB of bf16 (16.4 GB/s) against 227 µs for 4 MB of f32 (18.5 GB/s), 1.77x; unrolling the
//! one-row bf16 kernel over K (independent accumulators) changed nothing, so the limit is the
//! memory side, not the widening. A step also has costs that do not shrink (the f32 KV cache,
//! ≈ 20 MB per step at 200 positions; 49 products that each wake the second thread, which
//! waits for a core on a loaded machine). Larger k becomes arithmetic-bound, where the widening
//! FMAs cost as much as f32's (k = 8: 1.19x). The small preset gains more
//! than 2x because its bf16 weights (8.9 MB) stay in L3 while its f32 weights (17.8 MB) share
//! it with the other jobs.
//!
//! On the main job's trained aligned AR model (`exp/m1/ar_aligned`, 6.7 M, 20.7 / 10.4 MB per
//! step; `voxspec bench forward --model … --engine native --weights f32,bf16`, load ≈ 4): f32
//! 0.645 / 0.818 / 0.979 / 1.341 ms at k = 1 / 2 / 4 / 8, bf16 0.326 / 0.353 / 0.586 / 1.151
//! (1.98x at k = 1). Accuracy there (`examples/bf16_check.rs`, 40 random sentences): max
//! |Δlogit| 2.6e-2; greedy AR 40 of 40 sequences equal (5568 tokens), MTP(4) 37 of 40; on the
//! plain phone model (`exp/m1/ar_plain_phone`) AR 35 of 40 and MTP(4) 36 of 40 equal, the
//! others equal up to a flipped near-tie (10142 of 10973 AR tokens before the first difference).
//!
//! The bf16 kernels widen the weights in registers and keep f32 activations. The
//! AVX512-BF16 dot product (`_mm512_dpbf16_ps`, stable in Rust 1.89+, present on this CPU) was
//! measured against them on one thread (`examples/dpbf16.rs`, its own K-pair layout): in L3 it
//! is 1.8–1.9x faster at M = 4 and 8 (256 × 1024: 11 against 20 µs, 21 against 39), from
//! memory at M = 1 the two are within the noise, and it rounds the activations too (error
//! relative to Σ|x·w| 2.9e-4 against 2.0e-4). The decode step is bandwidth-bound at small k, so
//! the widening kernels ship; VDPBF16PS is the way to cheaper large-k (verification) steps.
//! On an Intel Xeon host (AVX512-BF16 and AMX too) the same example found it
//! slower than widening at every M (256 × 1024 in L3, µs: 22/28/32/83 against 27/15/26/67 at
//! M = 1/2/4/8; 1024² from memory 335–394 against 260–298), and a VDPBF16PS path in the
//! engine (re-pairing two packed rows per K-pair, activations rounded to bf16) made the main
//! job's bf16 steps 1.3–1.9x slower at k = 8–48; it was not kept.
//!
//! ### AMX tiles
//!
//! bf16 panels store their K rows in pairs (two cache lines per pair, the two rows' values of
//! a column side by side; `matmul/bf16.rs`), which is the layout an AMX-BF16 `TDPBF16PS` reads
//! its weight tile in (16 pairs × 16 columns, a 128-byte stride), so one packing serves the
//! widening kernels and the tiles. The tile kernel (`matmul/amx.rs`, inline assembly: Rust has
//! no stable AMX intrinsics) keeps four 16-column accumulator tiles per pair of panels and
//! splits each activation into two bf16 parts (`x = hi + lo`, 16 mantissa bits), so it computes
//! what the widening kernels compute, `Σ x · bf16(w)`, to 1.2e-6 of `Σ|x·w|` (tested against
//! an f64 product, and against bf16-rounded activations, which it would not pass). Measured on
//! the 2-vCPU Xeon (`examples/amx.rs`, one thread, weights in L2/L3): a `TDPBF16PS` cost about
//! the same whatever its rows, 40–100 cycles (Intel gives 16), so the tiles lose below 8 rows
//! (1.5–2x slower at 2) and win from 12: 0.52–0.78x the widening kernel's time at 12–32 rows
//! (256 × 1024 at 16 rows: 59 against 101 µs). The engine uses them from 12 rows: the main
//! job's forward over 32 tokens (a sentence's prefill) went from 5.41 / 3.51 ms to 2.47 / 2.79
//! (`bench forward --weights bf16 --max-k 32`, two interleaved pairs, `VOXSPEC_KERNEL=avx512`
//! against the default); its 8-token steps stay on the widening kernel.
//!
//! ## Both cores for small products
//!
//! A decoding step of the main job's model is ~50 products of 2–60 µs. Waking a parked rayon
//! worker costs about as much as such a product, so they ran on one core until [`team`]: one
//! helper thread per extra core polls an atomic word between products (parking after
//! [`team::SPIN`] without work), and each product of at least 2¹⁶ multiply-adds is split in two
//! by output panels, claimed from that word. Attention's heads (from 2¹⁷ multiply-adds) and the
//! MTP heads' logits (one task per head) use the same team. `bench forward --model
//! exp/minitts/ar --weights bf16`, three interleaved pairs, ms per step at k = 1 / 8, before →
//! after: 0.637 / 1.334 → 0.433 / 0.890, 0.588 / 0.965 → 0.397 / 0.799, 0.617 / 1.052 → 0.446 /
//! 0.894. The one-token step gains 1.4–1.5x, the 8-token one 1.2–1.5x: at k = 8 the products
//! are multiply-add-bound on both cores.
//!
//! ## int8 weights
//!
//! Measured on another machine than the tables above (2 vCPUs of an Intel Xeon with AVX-512,
//! AVX512-BF16 and AMX; idle; 17.7 GB/s read at the start of the run): `voxspec bench forward
//! --preset base --engine native --weights f32,bf16,int8 --generate 32`, ms per step at k = 1 /
//! 8 and greedy ms per token: f32 45.4 / 51.2, 46.1; bf16 23.7 / 33.0, 25.3; int8 15.6 / 32.7,
//! 16.0. int8 reads 203 MB per step and runs at 1.36x its floor at k = 1: widening (two
//! sign-extensions and two conversions per 32 weights) is cheap but not free, and at k = 8 the
//! step is arithmetic-bound like the others. On the main job's model (20.7 / 10.4 / 5.3 MB per
//! step), k = 1 / 8: f32 0.880 / 1.476, bf16 0.513 / 1.272, int8 0.369 / 1.385 ms. A second
//! thread for the small products at k ≥ 2 (lowering [`matmul`]'s work threshold to 512 Ki
//! multiply-adds) measured no faster on this machine and was not kept then: waking rayon's
//! parked workers cost what the split saved (the [`team`] later did it with spinning threads).
//!
//! ## Attention over the cache, and `exp`
//!
//! A profile of the main job's model at k = 8 (bf16, `perf record` over `bench forward
//! --max-k 8`) found attention at 25 % of the step and libm's `expf` at 7 %: the causal path
//! ran one axpy per head dimension over the scores (each score loaded and stored 64 times per
//! head), and the softmax and SwiGLU called `expf` once per value. Attention now runs as two
//! register-blocked products straight over the cache ([`attention`], `matmul/strided.rs`: 8
//! queries × 32 keys in zmm accumulators for all head dimensions, then `p · v`, masked loads
//! at the ragged edges), and [`vmath::exp`] is a branch-free polynomial the compiler
//! vectorises (relative error < 3e-7). After it the same profile shows the strided products
//! at 12 %, the softmax at 2.6 % and SwiGLU at 1.7 %. `bench forward --model exp/minitts/ar`,
//! two interleaved pairs of runs (before → after, ms per step at k = 8): bf16 2.54 / 2.73 →
//! 1.24 / 1.32, int8 2.47 / 1.60 → 1.40 / 1.70, f32 4.03 / 3.57 → 3.81 / 3.28 (f32 reads its
//! 20.7 MB from memory on that machine, so attention weighed less).
//!
//! What the 8-token step costs now is the products' arithmetic on one core: 256 × 1024 at
//! M = 8 from L3 runs at about 62 GFLOP/s on one thread whichever the weight format. Two
//! instructions that do more multiply-adds per instruction were measured on one thread
//! (`examples/dpbf16.rs`, `examples/vnni.rs`, 256 × 1024, 4 matrices in L3, µs per product):
//! VDPBF16PS was slower than widening bf16 here (above); VPDPBUSD on int8 activations and
//! weights (activations quantized per row, +128 for the unsigned operand, a column-sum
//! correction) took 11 / 14 / 21 / 42 µs at M = 1 / 2 / 4 / 8 against the int8 widening
//! kernel's 17 / 22 / 35 / 64, 1.5x (a second run, on the then idle machine: 6 / 9 / 14 / 24
//! against 12 / 16 / 24 / 45, 1.7–2.0x), with a larger error (2.0e-3 against 1.3e-3 of
//! Σ|x·w|). Neither was adopted: VPDPBUSD speeds up the one-token step as much as the
//! 8-token one, so it would not make int8's MTP step 3x cheaper than its AR step, and
//! quantizing activations changes what the int8 format computes.
//!
//! ## The multi-stream LM
//!
//! [`NativeMultiStream`] on the trained aligned multi-stream model `exp/ms/e1h4` (4 streams of
//! 256 codes, d 256, 4 layers, 4 heads per position, a voice vector; 21.8 / 10.9 MB of f32 /
//! bf16 weights per step with every head), `examples/ms_forward.rs`, ms per cached forward over
//! k new columns after 100 cached positions, median of 100, two runs (load average ≈ 6 on the 2
//! cores, so ±20 %):
//!
//! | engine | k = 1 | k = 2 | k = 4 | k = 8 | largest Δlogit vs Burn |
//! |---|---|---|---|---|---|
//! | Burn (`MsFrameLm`) | 0.628 / 0.753 | 0.993 / 0.915 | 1.181 / 1.191 | 2.153 / 2.049 | — |
//! | native f32 | 0.373 / 0.432 | 0.449 / 0.522 | 0.574 / 0.590 | 0.996 / 1.052 | 5.7e-6 |
//! | native bf16 | 0.221 / 0.220 | 0.283 / 0.292 | 0.504 / 0.513 | 0.976 / 0.985 | 1.3e-2 |
//!
//! Greedy decoding of 16 random sentences (durations from the model's predictor; ms per
//! utterance of ≈ 14 frames, prefill included): AR Burn 13.4, native f32 8.3, bf16 5.7; MTP(4)
//! Burn 10.2, native f32 5.6, bf16 4.1. The f32 engine's columns equal Burn's for all 16 (AR
//! and MTP); bf16 for 14 of 16 (rounding
//! moves an argmax; the others equal). Parity on random tiny models is tested in
//! `tests/multistream_parity.rs`.

pub mod attention;
pub mod bandwidth;
pub mod cache;
pub mod error;
pub mod lm;
pub mod matmul;
pub mod model;
pub mod multistream;
mod multistream_lm;
pub mod nar;
pub mod ops;
pub mod render;
mod stack;
pub mod team;
pub mod vmath;

pub use bandwidth::read_bandwidth_gbs;
pub use cache::NativeCache;
pub use error::{EngineError, Result};
pub use matmul::{Kernel, PackedLinear, WeightFormat};
pub use model::NativeMtp;
pub use multistream::NativeMultiStream;
pub use multistream_lm::NativeMsCache;
pub use nar::NativeNar;
pub use render::{NativeMelDecoder, NativeMelSpeech, NativeVocoder};
