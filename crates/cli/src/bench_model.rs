//! `voxspec bench train` and `voxspec bench forward`: the transformer core's training throughput
//! and the cost of scoring a block of `k` new tokens against one, both as JSON.
//!
//! - `train` runs the shared training loop (AdamW, global-norm clipping, everything a real run
//!   does except checkpoints) on a GPT-2-like causal LM over random tokens and reports tokens/s
//!   after warm-up steps. A ratio to a peer is printed only for a peer measured alongside:
//!   `--peer FILE` reads the JSON of `tools/bench_train_peer.py` (PyTorch, same config, same
//!   machine, run just before), and the two configs must agree.
//! - `forward` measures, on the MTP model with a KV cache, the time of one `extend` of `k` new
//!   tokens relative to `k = 1`, for `k = 1..=max_k`: speculative and multi-token decoding only
//!   pay if this stays far below `k`. `--engine burn,native` times Burn and the native engine
//!   in one run, `--weights f32,bf16,int8` the native engine over each weight format; each step is
//!   also given as a multiple of the bandwidth floor (the weights the step actually reads — f32
//!   for Burn, the chosen format for the native engine — at the measured read bandwidth of the
//!   memory they live in: the host's for the native engine, which always runs on the CPU, and
//!   for Burn on the CPU; the device's for Burn on a GPU, from sums over four 64 MB tensors).
//!   `--preset` measures a random model of a training preset. Each engine also
//!   runs the greedy decoding loop (`--generate` tokens: a single-token forward and an argmax
//!   per token), and `--peer FILE` puts the report of `tools/bench_forward_peer.py`
//!   (PyTorch + transformers' Llama of the same shape, measured alongside) beside it.
//!   `--mtp-heads K` times real decoders too, prefill excluded: AR against MTP with K heads and
//!   Viterbi path selection, per engine and weight format, on a model of the shape whatever its
//!   weights (MTP emits K tokens per forward until end of speech).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use voxspec_engine::WeightFormat;
use voxspec_eval::bench_forward::{ForwardModel, forward_bench_model};
use voxspec_eval::forward_report::{ForwardRun, forward_summary};
use voxspec_nn::linear::MatmulPrecision;
use voxspec_train::{ThroughputConfig, ThroughputReport, read_throughput_peer};
use voxspec_tts::{EngineKind, ForwardBench, device_read_bandwidth_gbs, run_forward_bench};

use voxspec_nn::Preset;

use crate::train_lm::mtp_config;

#[derive(Debug, Args)]
pub struct TrainBenchArgs {
    /// Transformer layers.
    #[arg(long, default_value_t = 6)]
    layers: usize,
    /// Model width.
    #[arg(long, default_value_t = 512)]
    d_model: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 8)]
    heads: usize,
    /// Vocabulary size.
    #[arg(long, default_value_t = 1024)]
    vocab: usize,
    /// Sequences per batch.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Tokens per sequence.
    #[arg(long, default_value_t = 256)]
    seq_len: usize,
    /// Steps not timed (allocation, kernel selection).
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Timed steps.
    #[arg(long, default_value_t = 8)]
    steps: usize,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-train.json")]
    out: PathBuf,
    /// A peer's report measured alongside on this machine (`tools/bench_train_peer.py --out
    /// FILE`, same flags): the report then carries the ratio to it.
    #[arg(long, value_name = "FILE")]
    peer: Option<PathBuf>,
    /// Float type of every tensor: f32, or f16 / bf16 where the device has them (weights,
    /// activations, gradients and optimizer state all in that type; no f32 master copy).
    #[arg(long, value_enum, default_value = "f32")]
    float: FloatArg,
    /// Precision of the linear layers' products: f32, bf16 (mixed precision, as PyTorch's CPU
    /// autocast: bf16 operands, f32 sums, everything else f32; needs AMX-BF16 or AVX512-BF16),
    /// or auto (bf16 with AMX-BF16 tiles, f32 elsewhere). A peer in f32 or in bf16 autocast is
    /// accepted beside bf16.
    #[arg(long, default_value_t = MatmulPrecision::F32)]
    matmul: MatmulPrecision,
    /// Also profile the step: each phase (data, forward, backward, optimizer; the device
    /// synchronised between them) and each operation family (linear layers, attention,
    /// LayerNorm, GELU, residual adds, loss, embedding) timed alone at the step's shapes. The
    /// peer's `--profile` report is printed beside it.
    #[arg(long)]
    profile: bool,
    /// Repetitions of each family in `--profile` (the median is reported).
    #[arg(long, default_value_t = 5)]
    profile_repeat: usize,
}

/// `bench train --float`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FloatArg {
    F32,
    F16,
    Bf16,
}

impl TrainBenchArgs {
    /// The float type `--float` asks the device for (`None` for the default f32).
    pub fn float_dtype(&self) -> Option<burn::tensor::FloatDType> {
        match self.float {
            FloatArg::F32 => None,
            FloatArg::F16 => Some(burn::tensor::FloatDType::F16),
            FloatArg::Bf16 => Some(burn::tensor::FloatDType::BF16),
        }
    }
}

#[derive(Debug, Args)]
pub struct ForwardBenchArgs {
    /// AR model directory to measure; without it, a random model of the shape below.
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Engines measured one after the other in this run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "native")]
    engine: Vec<EngineKind>,
    /// Weight formats of the native engine measured one after the other (comma-separated:
    /// f32, bf16, int8); Burn always runs f32.
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    weights: Vec<WeightFormat>,
    /// A random model of this training preset (its width, layers, heads and feed-forward
    /// width; one MTP head) instead of --d-model / --layers.
    #[arg(long, value_enum, conflicts_with_all = ["model", "d_model", "layers"])]
    preset: Option<Preset>,
    /// Largest block measured.
    #[arg(long, default_value_t = 8)]
    max_k: usize,
    /// Model width.
    #[arg(long, default_value_t = 512)]
    d_model: usize,
    /// Transformer layers.
    #[arg(long, default_value_t = 6)]
    layers: usize,
    /// Codebook size (output vocabulary − 1).
    #[arg(long, default_value_t = 1024)]
    codebook: usize,
    /// Cached positions before the measured block (the context it attends to).
    #[arg(long, default_value_t = 200)]
    context: usize,
    /// Repetitions per k; the median is reported.
    #[arg(long, default_value_t = 30)]
    repeat: usize,
    /// Tokens of the greedy decoding loop timed per engine (one single-token forward and an
    /// argmax per token, the loop of transformers' `generate`); 0 skips it.
    #[arg(long, default_value_t = 32)]
    generate: usize,
    /// Also time real decoders per engine over `--generate` tokens (prefill excluded, greedy,
    /// end of speech masked): AR against MTP with this many heads and Viterbi path selection
    /// (top 3 per head, transitions counted over random codes). A random model gets this many
    /// heads (the bandwidth floors then count every head's weights, though a one-token step
    /// reads only the first head's); a `--model` must have them. 0 skips it. Speed only: on
    /// random weights the codes mean nothing.
    #[arg(long, default_value_t = 0)]
    mtp_heads: usize,
    /// The report of `tools/bench_forward_peer.py` (PyTorch + transformers, same shape,
    /// measured alongside on this machine): printed side by side, with the ratios.
    #[arg(long, value_name = "FILE")]
    peer: Option<PathBuf>,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-forward.json")]
    out: PathBuf,
}

pub fn run_train(args: TrainBenchArgs) -> anyhow::Result<()> {
    let bench = ThroughputConfig {
        layers: args.layers,
        d_model: args.d_model,
        heads: args.heads,
        vocab: args.vocab,
        batch: args.batch,
        seq_len: args.seq_len,
        warmup: args.warmup,
        steps: args.steps,
        matmul: args.matmul,
    };
    // The peer is checked before anything is measured: a mismatch wastes no training.
    let config = serde_json::json!({
        "layers": args.layers, "d_model": args.d_model, "heads": args.heads,
        "vocab": args.vocab, "batch": args.batch, "seq_len": args.seq_len,
        "norm": "layer", "positions": "learned", "mlp": "gelu", "optimizer": "adamw",
    });
    let peer = args
        .peer
        .as_deref()
        .map(|p| read_throughput_peer(p, &config))
        .transpose()?;
    let float = format!("{:?}", args.float).to_lowercase();
    anyhow::ensure!(
        args.matmul == MatmulPrecision::F32 || args.float == FloatArg::F32,
        "--matmul bf16 is mixed precision over f32 tensors; it does not combine with --float {float}"
    );
    if let Some(p) = &peer {
        let theirs = p.dtype.as_deref().unwrap_or("f32");
        // Mixed precision is compared with PyTorch in f32 or in bf16 autocast.
        let mixed_ok = args.matmul == MatmulPrecision::Bf16 && matches!(theirs, "f32" | "bf16");
        anyhow::ensure!(
            theirs == float || mixed_ok,
            "the peer report computed in {theirs}, this run in {float}: run \
             tools/bench_train_peer.py with --dtype {float}"
        );
    }
    let dir = tempfile::tempdir().context("creating a scratch run directory")?;
    let device = voxspec_train::device::single()?;
    eprintln!(
        "training {} steps ({} warm-up) of a {:.1}M-parameter causal LM, batch {} x {}",
        args.steps + args.warmup,
        args.warmup,
        bench.parameters(&device)? as f64 / 1e6,
        args.batch,
        args.seq_len
    );
    let measured = bench.measure_with(&device, dir.path(), args.profile)?;
    let ops = if args.profile {
        eprintln!("timing each operation family at the step's shapes");
        Some(voxspec_train::profile_ops(
            &bench,
            &device,
            args.profile_repeat,
        )?)
    } else {
        None
    };
    let tps = measured.tokens_per_second;
    let mut report = ThroughputReport::new(&measured, config, peer, ops);
    report.float = float;
    report.matmul = args.matmul.to_string();
    report.device = voxspec_train::device::describe();
    report.host = voxspec_tts::cpu_model();
    write_report(&args.out, &report)?;
    print!("{}", report.profile_text());
    match (&report.peer, report.ratio_to_peer) {
        (Some(p), Some(ratio)) => println!(
            "training throughput ({} matmuls): {tps:.0} tokens/s ({ratio:.2}x {}'s {:.0} tokens/s \
             in {} measured alongside)",
            args.matmul,
            p.framework,
            p.tokens_per_second,
            p.dtype.as_deref().unwrap_or("f32")
        ),
        _ => println!(
            "training throughput ({} matmuls): {tps:.0} tokens/s",
            args.matmul
        ),
    }
    Ok(())
}

pub fn run_forward(args: ForwardBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_k >= 1, "--max-k must be at least 1");
    anyhow::ensure!(args.repeat >= 1, "--repeat must be at least 1");
    anyhow::ensure!(
        !args.engine.is_empty(),
        "--engine needs at least one engine"
    );
    anyhow::ensure!(
        !args.weights.is_empty(),
        "--weights needs at least one format"
    );
    let device = voxspec_train::device::single()?;
    device.seed(0);
    let source = match (&args.model, args.preset) {
        (Some(dir), _) => ForwardModel::Dir(dir),
        (None, Some(preset)) => ForwardModel::Random(mtp_config(preset, 16, args.codebook)),
        (None, None) => ForwardModel::Shape {
            d_model: args.d_model,
            layers: args.layers,
        },
    };
    let positions = args.context + args.max_k.max(args.generate) + 16;
    let (config, model) =
        forward_bench_model(source, args.codebook, args.mtp_heads, positions, &device)?;
    if args.mtp_heads > 0 {
        anyhow::ensure!(
            args.generate >= args.mtp_heads,
            "--mtp-heads {} needs --generate of at least as many tokens",
            args.mtp_heads
        );
        anyhow::ensure!(
            model.n_heads() >= args.mtp_heads,
            "--mtp-heads {}: the model has {} heads",
            args.mtp_heads,
            model.n_heads()
        );
    }
    // Burn computes in the device's memory: on a GPU its floor is the GPU's bandwidth.
    let device_bandwidth_gbs = if voxspec_train::device::single_is_cpu() {
        None
    } else {
        Some(device_read_bandwidth_gbs(&device).with_context(voxspec_train::device::describe)?)
    };
    let t = &config.transformer;
    let run_config = serde_json::json!({
        "model": args.model, "layers": t.n_layers, "d_model": t.d_model,
        "d_ff": t.d_ff, "codebook": config.codebook_size, "aligned": model.is_aligned(),
        "context": args.context, "repeat": args.repeat, "device": format!("{device:?}"),
        "threads": rayon::current_num_threads(), "preset": args.preset,
        "n_heads": t.n_heads,
    });
    let bench = ForwardBench {
        engines: args.engine.clone(),
        weights: args.weights.clone(),
        max_k: args.max_k,
        context: args.context,
        repeat: args.repeat,
        generate: args.generate,
        mtp_heads: args.mtp_heads,
    };
    let report = run_forward_bench(
        &model,
        &config,
        &bench,
        run_config,
        args.peer.as_deref(),
        device_bandwidth_gbs,
    )?;
    write_report(&args.out, &report)?;
    let run = ForwardRun {
        context: args.context,
        generate: args.generate,
        threads: rayon::current_num_threads(),
        device: &voxspec_train::device::describe(),
    };
    print!("{}", forward_summary(&report, run));
    Ok(())
}

fn write_report(path: &std::path::Path, report: &impl Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    voxspec_data::write_atomic(path, json.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
