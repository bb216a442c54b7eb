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
use burn::module::Module;
use clap::Args;
use serde::Serialize;
use voxspec_engine::{NativeMtp, WeightFormat};
use voxspec_infer::{
    ArDecoder, LanguageModel, MtpDecoder, SamplerConfig, Transitions, TransitionsConfig,
    ViterbiConfig,
};
use voxspec_mtp::{
    MtpConfig, TtsPrompt, decode_ms_per_token, forward_costs, greedy_ms_per_token, load_mtp,
};
use voxspec_nn::TransformerConfig;
use voxspec_train::ThroughputConfig;
use voxspec_tts::EngineKind;

use crate::train_lm::{LmPreset, mtp_config};

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
}

/// What the peer script writes: its framework, its config and its throughput.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct PeerReport {
    framework: String,
    config: serde_json::Value,
    tokens_per_second: f64,
}

/// Reads a peer report and checks that it measured the same config.
fn read_peer(path: &std::path::Path, config: &serde_json::Value) -> anyhow::Result<PeerReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the peer report {}", path.display()))?;
    let peer: PeerReport = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected {{\"framework\", \"config\", \"tokens_per_second\"}}",
            path.display()
        )
    })?;
    let keys: Vec<&str> = config
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    same_config(path, &peer.config, config, &keys)?;
    anyhow::ensure!(
        peer.tokens_per_second.is_finite() && peer.tokens_per_second > 0.0,
        "{}: tokens_per_second must be positive",
        path.display()
    );
    Ok(peer)
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
    preset: Option<LmPreset>,
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

/// What `tools/bench_forward_peer.py` writes.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct ForwardPeer {
    framework: String,
    config: serde_json::Value,
    /// Median ms of a cached forward over k new tokens, k = 1, 2, ….
    forward: Vec<PeerPoint>,
    /// Greedy `generate`, ms per new token.
    generate_ms_per_token: f64,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct PeerPoint {
    k: usize,
    median_ms: f64,
}

/// Checks that the peer report at `path` measured `keys` of `ours` as this run does.
fn same_config(
    path: &std::path::Path,
    peer: &serde_json::Value,
    ours: &serde_json::Value,
    keys: &[&str],
) -> anyhow::Result<()> {
    for &key in keys {
        let mine = &ours[key];
        if peer.get(key) != Some(mine) {
            anyhow::bail!(
                "{}: the peer measured {key} = {}, this run {mine}; run both with the same flags",
                path.display(),
                peer.get(key).unwrap_or(&serde_json::Value::Null)
            );
        }
    }
    Ok(())
}

/// Read bandwidth of a Burn device, GB/s: the median time of summing four 64 MB f32 tensors
/// (256 MB read once; four buffers stay inside every GPU's buffer limits and outgrow its L2
/// cache) over five runs after a warm-up.
fn device_read_bandwidth_gbs(device: &burn::tensor::Device) -> anyhow::Result<f64> {
    const N: usize = 16 << 20;
    let xs: Vec<_> = (0..4)
        .map(|_| burn::tensor::Tensor::<1>::ones([N], device))
        .collect();
    let mut secs = Vec::with_capacity(5);
    for rep in 0..6 {
        let t = std::time::Instant::now();
        for x in &xs {
            x.clone().sum().try_into_scalar::<f32>().map_err(|e| {
                anyhow::anyhow!("{}: reading a sum back: {e:?}", crate::device::describe())
            })?;
        }
        if rep > 0 {
            secs.push(t.elapsed().as_secs_f64());
        }
    }
    secs.sort_by(f64::total_cmp);
    Ok((xs.len() * N * 4) as f64 / secs[secs.len() / 2] / 1e9)
}

/// Reads a forward peer report and checks that it measured this run's shape.
fn read_forward_peer(
    path: &std::path::Path,
    config: &serde_json::Value,
) -> anyhow::Result<ForwardPeer> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the peer report {}", path.display()))?;
    let peer: ForwardPeer = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected the JSON of tools/bench_forward_peer.py ({{\"framework\", \"config\", \
             \"forward\", \"generate_ms_per_token\"}})",
            path.display()
        )
    })?;
    same_config(
        path,
        &peer.config,
        config,
        &["layers", "d_model", "d_ff", "n_heads", "context"],
    )?;
    anyhow::ensure!(
        peer.forward
            .first()
            .is_some_and(|p| p.k == 1 && p.median_ms > 0.0),
        "{}: the peer's forward costs must start at k = 1",
        path.display()
    );
    Ok(peer)
}

/// Greedy decoding speed of one engine and weight format.
#[derive(Debug, Serialize)]
struct GreedyPoint {
    engine: EngineKind,
    weights: String,
    tokens: usize,
    ms_per_token: f64,
    /// The peer's `generate` ms/token over this one (with `--peer`).
    speedup_over_peer: Option<f64>,
}

#[derive(Debug, Serialize)]
struct TrainReport {
    benchmark: &'static str,
    config: serde_json::Value,
    parameters: usize,
    tokens_per_step: usize,
    timed_steps: usize,
    median_step_seconds: f64,
    tokens_per_second: f64,
    /// The peer measured alongside (`--peer`), if any.
    peer: Option<PeerReport>,
    /// tokens_per_second / the peer's.
    ratio_to_peer: Option<f64>,
    cores: usize,
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
    };
    let dir = tempfile::tempdir().context("creating a scratch run directory")?;
    let device = crate::device::single()?;
    eprintln!(
        "training {} steps ({} warm-up) of a {:.1}M-parameter causal LM, batch {} x {}",
        args.steps + args.warmup,
        args.warmup,
        bench.parameters(&device)? as f64 / 1e6,
        args.batch,
        args.seq_len
    );
    let measured = bench.measure(&device, dir.path())?;
    let tps = measured.tokens_per_second;
    let config = serde_json::json!({
        "layers": args.layers, "d_model": args.d_model, "heads": args.heads,
        "vocab": args.vocab, "batch": args.batch, "seq_len": args.seq_len,
        "norm": "layer", "positions": "learned", "mlp": "gelu", "optimizer": "adamw",
    });
    let peer = args
        .peer
        .as_deref()
        .map(|p| read_peer(p, &config))
        .transpose()?;
    let report = TrainReport {
        benchmark: "train",
        config,
        parameters: measured.parameters,
        tokens_per_step: measured.tokens_per_step,
        timed_steps: measured.timed_steps,
        median_step_seconds: measured.median_step_seconds,
        tokens_per_second: tps,
        ratio_to_peer: peer.as_ref().map(|p| tps / p.tokens_per_second),
        peer,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    write_report(&args.out, &report)?;
    match (&report.peer, report.ratio_to_peer) {
        (Some(p), Some(ratio)) => println!(
            "training throughput: {tps:.0} tokens/s ({ratio:.2}x {}'s {:.0} tokens/s measured alongside)",
            p.framework, p.tokens_per_second
        ),
        _ => println!("training throughput: {tps:.0} tokens/s"),
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct ForwardPoint {
    engine: EngineKind,
    /// Weight format (f32 for Burn).
    weights: String,
    k: usize,
    median_ms: f64,
    cost_relative_to_k1: f64,
    ms_per_token: f64,
    /// The step's time over the bandwidth floor of the weights it reads.
    floor_multiple: f64,
}

/// The weights one step reads in one format, and the least time to read them.
#[derive(Debug, Serialize)]
struct Floor {
    weights: String,
    weight_mb: f64,
    floor_ms: f64,
}

#[derive(Debug, Serialize)]
struct ForwardReport {
    benchmark: &'static str,
    config: serde_json::Value,
    parameters: usize,
    /// f32 weights one step reads (every linear layer and the heads), MB.
    weight_mb: f64,
    /// Read bandwidth measured with every thread, GB/s.
    bandwidth_gbs: f64,
    /// The native engine's matmul kernel (`amx`, `avx512`, `avx2`, `portable`; the environment
    /// variable `VOXSPEC_KERNEL` caps it).
    kernel: &'static str,
    /// `weight_mb` read at `bandwidth_gbs`: the least an f32 step can cost, ms.
    floor_ms: f64,
    /// The same per weight format measured (the native engine's, in host memory).
    floors: Vec<Floor>,
    /// Read bandwidth of the `--device` when it is not the CPU (sums over 4 x 64 MB), GB/s.
    device_bandwidth_gbs: Option<f64>,
    /// The f32 weights read at the bandwidth of the memory Burn's rows run in, ms.
    burn_floor_ms: f64,
    results: Vec<ForwardPoint>,
    /// Greedy decoding per engine (`--generate`).
    greedy: Vec<GreedyPoint>,
    /// AR and MTP + Viterbi decoding per engine (`--mtp-heads`).
    decoders: Vec<DecoderPoint>,
    /// The peer measured alongside (`--peer`).
    peer: Option<ForwardPeer>,
}

/// One real decoder's speed on one engine and weight format (`--mtp-heads`).
#[derive(Debug, Serialize)]
struct DecoderPoint {
    engine: EngineKind,
    weights: String,
    decoder: String,
    tokens: usize,
    ms_per_token: f64,
    /// AR's ms/token on the same engine and weights over this one.
    speedup_over_ar: f64,
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
    let device = crate::device::single()?;
    device.seed(0);
    let (config, model) = match (&args.model, args.preset) {
        (Some(dir), _) => {
            let (file, model) = load_mtp(dir, &device)
                .with_context(|| format!("loading the AR model {}", dir.display()))?;
            (file.model, model)
        }
        (None, Some(preset)) => {
            let mut config =
                mtp_config(preset, 16, args.codebook).with_n_heads(args.mtp_heads.max(1));
            let t = &mut config.transformer;
            t.dropout = 0.0;
            t.max_seq_len = t
                .max_seq_len
                .max(args.context + args.max_k.max(args.generate) + 16);
            let model = config.init(&device)?;
            (config, model)
        }
        (None, None) => {
            let core = TransformerConfig::new()
                .with_d_model(args.d_model)
                .with_n_heads(8)
                .with_n_layers(args.layers)
                .with_d_ff(4 * args.d_model)
                .with_dropout(0.0)
                .with_max_seq_len(args.context + args.max_k.max(args.generate) + 16);
            let config =
                MtpConfig::new(16, args.codebook, core).with_n_heads(args.mtp_heads.max(1));
            let model = config.init(&device)?;
            (config, model)
        }
    };
    let aligned = model.is_aligned();
    let bandwidth_gbs = voxspec_engine::read_bandwidth_gbs();
    // The engine in each format measured, and f32 for Burn's floor.
    let native = NativeMtp::from_burn(&model, &config)
        .context("building the native engine from the AR model")?;
    // `--engine native` runs every `--weights` format, `native-bf16` bf16, `native-int8` int8.
    let native_formats = |kind: EngineKind| match kind {
        EngineKind::Burn => Vec::new(),
        EngineKind::Native => args.weights.clone(),
        EngineKind::NativeBf16 => vec![WeightFormat::Bf16],
        EngineKind::NativeInt8 => vec![WeightFormat::Int8],
    };
    let mut engines: Vec<(WeightFormat, NativeMtp)> = Vec::new();
    let wanted = args.engine.iter().flat_map(|&kind| native_formats(kind));
    for format in std::iter::once(WeightFormat::F32).chain(wanted) {
        if engines.iter().all(|(f, _)| *f != format) {
            engines.push((format, native.clone().into_weight_format(format)));
        }
    }
    drop(native);
    let floors: Vec<Floor> = engines
        .iter()
        .map(|(format, engine)| {
            let bytes = engine.weight_bytes() as f64;
            Floor {
                weights: format.to_string(),
                weight_mb: bytes / 1e6,
                floor_ms: bytes / (bandwidth_gbs * 1e6),
            }
        })
        .collect();
    let floor_of = |format: WeightFormat| {
        floors
            .iter()
            .find(|f| f.weights == format.name())
            .map_or(f64::NAN, |f| f.floor_ms)
    };
    // Burn computes in the device's memory: on a GPU its floor is the GPU's bandwidth.
    let device_bandwidth_gbs = if crate::device::single_is_cpu() {
        None
    } else {
        Some(device_read_bandwidth_gbs(&device)?)
    };
    // MB over GB/s is ms.
    let burn_floor_ms =
        device_bandwidth_gbs.map_or(floors[0].floor_ms, |gbs| floors[0].weight_mb / gbs);
    let mut results = Vec::new();
    let mut push = |kind: EngineKind, format: WeightFormat, medians: Vec<f64>| {
        let floor = match kind {
            EngineKind::Burn => burn_floor_ms,
            EngineKind::Native | EngineKind::NativeBf16 | EngineKind::NativeInt8 => {
                floor_of(format)
            }
        };
        for (i, &m) in medians.iter().enumerate() {
            results.push(ForwardPoint {
                engine: kind,
                weights: format.to_string(),
                k: i + 1,
                median_ms: m,
                cost_relative_to_k1: m / medians[0],
                ms_per_token: m / (i + 1) as f64,
                floor_multiple: m / floor,
            });
        }
    };
    let t = &config.transformer;
    let run_config = serde_json::json!({
        "model": args.model, "layers": t.n_layers, "d_model": t.d_model,
        "d_ff": t.d_ff, "codebook": config.codebook_size, "aligned": aligned,
        "context": args.context, "repeat": args.repeat, "device": format!("{device:?}"),
        "threads": rayon::current_num_threads(), "preset": args.preset,
        "n_heads": t.n_heads,
    });
    let peer = args
        .peer
        .as_deref()
        .map(|p| read_forward_peer(p, &run_config))
        .transpose()?;
    let mut greedy = Vec::new();
    let mut push_greedy = |kind: EngineKind, format: WeightFormat, ms_per_token: f64| {
        greedy.push(GreedyPoint {
            engine: kind,
            weights: format.to_string(),
            tokens: args.generate,
            ms_per_token,
            speedup_over_peer: peer
                .as_ref()
                .map(|p| p.generate_ms_per_token / ms_per_token),
        });
    };
    let greedy_repeat = args.repeat.clamp(1, 5);
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
    // Only the decoder timing (`--mtp-heads`) needs them.
    let transitions = if args.mtp_heads > 0 {
        Some(std::sync::Arc::new(random_transitions(
            config.codebook_size,
        )?))
    } else {
        None
    };
    let mut decoders = Vec::new();
    let mut push_decoders = |kind: EngineKind, format: WeightFormat, rows: Vec<(String, f64)>| {
        let ar = rows.first().map_or(f64::NAN, |r| r.1);
        for (decoder, ms) in rows {
            decoders.push(DecoderPoint {
                engine: kind,
                weights: format.to_string(),
                decoder,
                tokens: args.generate,
                ms_per_token: ms,
                speedup_over_ar: ar / ms,
            });
        }
    };
    for &kind in &args.engine {
        match kind {
            EngineKind::Burn => {
                let medians =
                    forward_costs(&model, aligned, args.context, args.max_k, args.repeat)?;
                push(kind, WeightFormat::F32, medians);
                if args.generate > 0 {
                    let ms = greedy_ms_per_token(
                        &model,
                        aligned,
                        args.context,
                        args.generate,
                        greedy_repeat,
                    )?;
                    push_greedy(kind, WeightFormat::F32, ms);
                }
                if let Some(transitions) = &transitions {
                    let rows = time_decoders(&model, aligned, &args, transitions)?;
                    push_decoders(kind, WeightFormat::F32, rows);
                }
            }
            EngineKind::Native | EngineKind::NativeBf16 | EngineKind::NativeInt8 => {
                for format in native_formats(kind) {
                    let engine = engines
                        .iter()
                        .find(|(f, _)| *f == format)
                        .map(|(_, e)| e)
                        .context("an engine for every format")?;
                    let medians =
                        forward_costs(engine, aligned, args.context, args.max_k, args.repeat)?;
                    push(kind, format, medians);
                    if args.generate > 0 {
                        let ms = greedy_ms_per_token(
                            engine,
                            aligned,
                            args.context,
                            args.generate,
                            greedy_repeat,
                        )?;
                        push_greedy(kind, format, ms);
                    }
                    if let Some(transitions) = &transitions {
                        let rows = time_decoders(engine, aligned, &args, transitions)?;
                        push_decoders(kind, format, rows);
                    }
                }
            }
        }
    }
    let f32_floor = &floors[0];
    let report = ForwardReport {
        benchmark: "forward",
        config: run_config,
        parameters: model.num_params(),
        weight_mb: f32_floor.weight_mb,
        bandwidth_gbs,
        kernel: voxspec_engine::Kernel::detect().name(),
        floor_ms: f32_floor.floor_ms,
        results,
        floors,
        device_bandwidth_gbs,
        burn_floor_ms,
        greedy,
        decoders,
        peer,
    };
    write_report(&args.out, &report)?;
    println!(
        "{} parameters, {} cached positions; host read bandwidth {:.1} GB/s ({} threads); \
         native kernel {}",
        report.parameters,
        args.context,
        bandwidth_gbs,
        rayon::current_num_threads(),
        report.kernel,
    );
    for f in &report.floors {
        println!(
            "{} weights: {:.1} MB per step, floor {:.3} ms",
            f.weights, f.weight_mb, f.floor_ms
        );
    }
    if let Some(gbs) = device_bandwidth_gbs {
        println!(
            "{}: read bandwidth {gbs:.1} GB/s (sums over 4 x 64 MB); Burn's f32 floor there {:.3} ms \
             (the native engine's rows run on the host)",
            crate::device::describe(),
            burn_floor_ms
        );
    }
    println!(
        "| engine | weights | k | ms | cost(k)/cost(1) | ms/token | x floor |\n\
         |---|---|---|---|---|---|---|"
    );
    for p in &report.results {
        println!(
            "| {:?} | {} | {} | {:.3} | {:.2} | {:.3} | {:.2} |",
            p.engine,
            p.weights,
            p.k,
            p.median_ms,
            p.cost_relative_to_k1,
            p.ms_per_token,
            p.floor_multiple
        );
    }
    if let Some(peer) = &report.peer {
        println!(
            "\n{} on the same shape, measured alongside:",
            peer.framework
        );
        println!("| k | ms | cost(k)/cost(1) |\n|---|---|---|");
        let one = peer.forward[0].median_ms;
        for p in &peer.forward {
            println!(
                "| {} | {:.3} | {:.2} |",
                p.k,
                p.median_ms,
                p.median_ms / one
            );
        }
        println!(
            "greedy generate: {:.3} ms/token",
            peer.generate_ms_per_token
        );
    }
    for g in &report.greedy {
        let vs = g
            .speedup_over_peer
            .map(|r| format!(" ({r:.2}x faster than the peer's generate)"))
            .unwrap_or_default();
        println!(
            "greedy decoding, {:?} {}: {:.3} ms/token over {} tokens{vs}",
            g.engine, g.weights, g.ms_per_token, g.tokens
        );
    }
    if !report.decoders.is_empty() {
        println!(
            "\ndecoding {} tokens (greedy, prefill excluded):\n\
             | engine | weights | decoder | ms/token | speed-up over AR |\n|---|---|---|---|---|",
            args.generate
        );
        for d in &report.decoders {
            println!(
                "| {:?} | {} | {} | {:.3} | {:.2}x |",
                d.engine, d.weights, d.decoder, d.ms_per_token, d.speedup_over_ar
            );
        }
    }
    Ok(())
}

/// Transitions counted over one long pseudo-random code sequence: what Viterbi path selection
/// needs to run (`--mtp-heads`), not a language model of speech.
fn random_transitions(codebook: usize) -> anyhow::Result<Transitions> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let codes: Vec<u32> = (0..50_000)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % codebook as u64) as u32
        })
        .collect();
    Ok(Transitions::from_sequences(
        std::iter::once(codes.as_slice()),
        codebook + 1,
        &TransitionsConfig::default(),
    )?)
}

/// AR and MTP with Viterbi (`--mtp-heads` heads, top 3) over `--generate` tokens on `model`:
/// `(label, ms per token)`, AR first.
fn time_decoders<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    args: &ForwardBenchArgs,
    transitions: &std::sync::Arc<Transitions>,
) -> anyhow::Result<Vec<(String, f64)>> {
    let greedy = SamplerConfig::greedy();
    let repeat = args.repeat.clamp(1, 5);
    let (context, tokens) = (args.context, args.generate);
    let ar = decode_ms_per_token(
        model,
        &mut ArDecoder::new(),
        aligned,
        context,
        tokens,
        repeat,
        &greedy,
    )?;
    let mut mtp =
        MtpDecoder::with_viterbi(args.mtp_heads, ViterbiConfig::new(3), transitions.clone())?;
    let ms = decode_ms_per_token(model, &mut mtp, aligned, context, tokens, repeat, &greedy)?;
    Ok(vec![
        ("ar".into(), ar),
        (format!("mtp+viterbi k={} top_k=3", args.mtp_heads), ms),
    ])
}

fn write_report(path: &std::path::Path, report: &impl Serialize) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    voxspec_data::write_atomic(path, json.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
