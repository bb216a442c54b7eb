//! The forward benchmark (`voxspec bench forward`): on an MTP model with a KV cache, the time
//! of one `extend` of `k` new tokens relative to `k = 1` for `k = 1..=max_k`, per engine and
//! weight format, each step also as a multiple of the bandwidth floor of the weights it reads;
//! the greedy decoding loop; and optionally AR against MTP with Viterbi path selection. A peer's
//! report (`tools/bench_forward_peer.py`) measured alongside is read and checked here.

use std::path::Path;
use std::sync::Arc;

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};
use voxspec_engine::{NativeMtp, WeightFormat};
use voxspec_infer::{
    ArDecoder, LanguageModel, MtpDecoder, SamplerConfig, Transitions, TransitionsConfig,
    ViterbiConfig,
};
use voxspec_mtp::{
    MtpConfig, MtpModel, TtsPrompt, decode_ms_per_token, forward_costs, greedy_ms_per_token,
};

use crate::engine::EngineKind;
use crate::error::{Result, TtsError};

/// What one forward benchmark measures.
#[derive(Debug, Clone)]
pub struct ForwardBench {
    /// Engines measured one after the other.
    pub engines: Vec<EngineKind>,
    /// Weight formats of [`EngineKind::Native`] (Burn always runs f32).
    pub weights: Vec<WeightFormat>,
    /// Largest block measured.
    pub max_k: usize,
    /// Cached positions before the measured block.
    pub context: usize,
    /// Repetitions per k; the median is reported.
    pub repeat: usize,
    /// Tokens of the greedy decoding loop per engine (0: skipped).
    pub generate: usize,
    /// Heads of the MTP + Viterbi decoder timed against AR (0: skipped).
    pub mtp_heads: usize,
}

/// What `tools/bench_forward_peer.py` writes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForwardPeer {
    /// The peer's framework.
    pub framework: String,
    /// The shape it measured.
    pub config: serde_json::Value,
    /// Median ms of a cached forward over k new tokens, k = 1, 2, ….
    pub forward: Vec<PeerPoint>,
    /// Greedy `generate`, ms per new token.
    pub generate_ms_per_token: f64,
}

/// One block size of the peer's forward costs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerPoint {
    /// New tokens of the forward.
    pub k: usize,
    /// Its median time, ms.
    pub median_ms: f64,
}

/// Greedy decoding speed of one engine and weight format.
#[derive(Debug, Serialize)]
pub struct GreedyPoint {
    /// The engine.
    pub engine: EngineKind,
    /// Its weight format.
    pub weights: String,
    /// Tokens decoded.
    pub tokens: usize,
    /// Milliseconds per token.
    pub ms_per_token: f64,
    /// The peer's `generate` ms/token over this one (with a peer).
    pub speedup_over_peer: Option<f64>,
}

/// The cost of one block size on one engine and weight format.
#[derive(Debug, Serialize)]
pub struct ForwardPoint {
    /// The engine.
    pub engine: EngineKind,
    /// Weight format (f32 for Burn).
    pub weights: String,
    /// New tokens of the forward.
    pub k: usize,
    /// Median time, ms.
    pub median_ms: f64,
    /// `median_ms` over that of k = 1.
    pub cost_relative_to_k1: f64,
    /// `median_ms / k`.
    pub ms_per_token: f64,
    /// The step's time over the bandwidth floor of the weights it reads.
    pub floor_multiple: f64,
}

/// The weights one step reads in one format, and the least time to read them.
#[derive(Debug, Serialize)]
pub struct Floor {
    /// The weight format.
    pub weights: String,
    /// Megabytes read per step.
    pub weight_mb: f64,
    /// Those read at the host's bandwidth, ms.
    pub floor_ms: f64,
}

/// One real decoder's speed on one engine and weight format.
#[derive(Debug, Serialize)]
pub struct DecoderPoint {
    /// The engine.
    pub engine: EngineKind,
    /// Its weight format.
    pub weights: String,
    /// The decoder's label.
    pub decoder: String,
    /// Tokens decoded.
    pub tokens: usize,
    /// Milliseconds per token.
    pub ms_per_token: f64,
    /// AR's ms/token on the same engine and weights over this one.
    pub speedup_over_ar: f64,
}

/// The JSON report of the forward benchmark.
#[derive(Debug, Serialize)]
pub struct ForwardReport {
    /// `"forward"`.
    pub benchmark: &'static str,
    /// The run's settings and model shape.
    pub config: serde_json::Value,
    /// Parameters of the model.
    pub parameters: usize,
    /// f32 weights one step reads (every linear layer and the heads), MB.
    pub weight_mb: f64,
    /// Read bandwidth measured with every thread, GB/s.
    pub bandwidth_gbs: f64,
    /// The native engine's matmul kernel (`amx`, `avx512`, `avx2`, `portable`; the environment
    /// variable `VOXSPEC_KERNEL` caps it).
    pub kernel: &'static str,
    /// `weight_mb` read at `bandwidth_gbs`: the least an f32 step can cost, ms.
    pub floor_ms: f64,
    /// The same per weight format measured (the native engine's, in host memory).
    pub floors: Vec<Floor>,
    /// Read bandwidth of the device when it is not the CPU (sums over 4 x 64 MB), GB/s.
    pub device_bandwidth_gbs: Option<f64>,
    /// The f32 weights read at the bandwidth of the memory Burn's rows run in, ms.
    pub burn_floor_ms: f64,
    /// Forward costs per engine, weight format and k.
    pub results: Vec<ForwardPoint>,
    /// Greedy decoding per engine.
    pub greedy: Vec<GreedyPoint>,
    /// AR and MTP + Viterbi decoding per engine.
    pub decoders: Vec<DecoderPoint>,
    /// The peer measured alongside.
    pub peer: Option<ForwardPeer>,
}

/// Checks that the peer report at `path` measured `keys` of `ours` as this run does.
///
/// # Errors
/// [`TtsError::Bench`] naming the first key that differs.
pub fn same_peer_config(
    path: &Path,
    peer: &serde_json::Value,
    ours: &serde_json::Value,
    keys: &[&str],
) -> Result<()> {
    for &key in keys {
        let mine = &ours[key];
        if peer.get(key) != Some(mine) {
            return Err(TtsError::Bench {
                what: path.display().to_string(),
                reason: format!(
                    "the peer measured {key} = {}, this run {mine}; run both with the same flags",
                    peer.get(key).unwrap_or(&serde_json::Value::Null)
                ),
            });
        }
    }
    Ok(())
}

/// Reads a forward peer report and checks that it measured the shape in `config`.
///
/// # Errors
/// [`TtsError::Bench`] for an unreadable or malformed report, or one of another shape.
pub fn read_forward_peer(path: &Path, config: &serde_json::Value) -> Result<ForwardPeer> {
    let bad = |reason: String| TtsError::Bench {
        what: path.display().to_string(),
        reason,
    };
    let text =
        std::fs::read_to_string(path).map_err(|e| bad(format!("reading the peer report: {e}")))?;
    let peer: ForwardPeer = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "expected the JSON of tools/bench_forward_peer.py ({{\"framework\", \"config\", \
             \"forward\", \"generate_ms_per_token\"}}): {e}"
        ))
    })?;
    same_peer_config(
        path,
        &peer.config,
        config,
        &["layers", "d_model", "d_ff", "n_heads", "context"],
    )?;
    if !peer
        .forward
        .first()
        .is_some_and(|p| p.k == 1 && p.median_ms > 0.0)
    {
        return Err(bad("the peer's forward costs must start at k = 1".into()));
    }
    Ok(peer)
}

/// Read bandwidth of a Burn device, GB/s: the median time of summing four 64 MB f32 tensors
/// (256 MB read once; four buffers stay inside every GPU's buffer limits and outgrow its L2
/// cache) over five runs after a warm-up.
///
/// # Errors
/// [`TtsError::TensorRead`] when a sum cannot be read back.
pub fn device_read_bandwidth_gbs(device: &Device) -> Result<f64> {
    const N: usize = 16 << 20;
    let xs: Vec<_> = (0..4).map(|_| Tensor::<1>::ones([N], device)).collect();
    let mut secs = Vec::with_capacity(5);
    for rep in 0..6 {
        let t = std::time::Instant::now();
        for x in &xs {
            x.clone()
                .sum()
                .try_into_scalar::<f32>()
                .map_err(|e| TtsError::TensorRead {
                    what: "a sum",
                    reason: format!("{device:?}: {e:?}"),
                })?;
        }
        if rep > 0 {
            secs.push(t.elapsed().as_secs_f64());
        }
    }
    secs.sort_by(f64::total_cmp);
    Ok((xs.len() * N * 4) as f64 / secs[secs.len() / 2] / 1e9)
}

/// Runs the forward benchmark on `model` (of `config`): forward costs, greedy decoding and,
/// with `bench.mtp_heads`, AR against MTP + Viterbi, for each engine of `bench`. `run_config`
/// is the report's `config` (a peer at `peer` is checked against it); `device_bandwidth_gbs`
/// is the device's read bandwidth when Burn runs off the CPU
/// ([`device_read_bandwidth_gbs`]).
///
/// # Errors
/// [`TtsError::Stage`] when the native engine cannot be built from the model; the peer's; the
/// measurements' (a block or context beyond the model's positions, a model with fewer heads
/// than `bench.mtp_heads`).
pub fn run_forward_bench(
    model: &MtpModel,
    config: &MtpConfig,
    bench: &ForwardBench,
    run_config: serde_json::Value,
    peer: Option<&Path>,
    device_bandwidth_gbs: Option<f64>,
) -> Result<ForwardReport> {
    let aligned = model.is_aligned();
    let bandwidth_gbs = voxspec_engine::read_bandwidth_gbs();
    // The engine in each format measured, and f32 for Burn's floor.
    let native = NativeMtp::from_burn(model, config).map_err(TtsError::stage(
        "building the native engine from the AR model",
    ))?;
    // `native` runs every `weights` format, `native-bf16` bf16, `native-int8` int8.
    let native_formats = |kind: EngineKind| match kind {
        EngineKind::Burn => Vec::new(),
        EngineKind::Native => bench.weights.clone(),
        EngineKind::NativeBf16 => vec![WeightFormat::Bf16],
        EngineKind::NativeInt8 => vec![WeightFormat::Int8],
    };
    let mut engines: Vec<(WeightFormat, NativeMtp)> = Vec::new();
    let wanted = bench.engines.iter().flat_map(|&kind| native_formats(kind));
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
    // MB over GB/s is ms. Burn computes in the device's memory: on a GPU its floor is the
    // GPU's bandwidth.
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
    let peer = peer
        .map(|p| read_forward_peer(p, &run_config))
        .transpose()?;
    let mut greedy = Vec::new();
    let mut push_greedy = |kind: EngineKind, format: WeightFormat, ms_per_token: f64| {
        greedy.push(GreedyPoint {
            engine: kind,
            weights: format.to_string(),
            tokens: bench.generate,
            ms_per_token,
            speedup_over_peer: peer
                .as_ref()
                .map(|p| p.generate_ms_per_token / ms_per_token),
        });
    };
    let greedy_repeat = bench.repeat.clamp(1, 5);
    // Only the decoder timing (`mtp_heads`) needs them.
    let transitions = if bench.mtp_heads > 0 {
        Some(Arc::new(random_transitions(config.codebook_size)?))
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
                tokens: bench.generate,
                ms_per_token: ms,
                speedup_over_ar: ar / ms,
            });
        }
    };
    let (context, max_k, repeat) = (bench.context, bench.max_k, bench.repeat);
    for &kind in &bench.engines {
        match kind {
            EngineKind::Burn => {
                let medians = forward_costs(model, aligned, context, max_k, repeat)?;
                push(kind, WeightFormat::F32, medians);
                if bench.generate > 0 {
                    let ms = greedy_ms_per_token(
                        model,
                        aligned,
                        context,
                        bench.generate,
                        greedy_repeat,
                    )?;
                    push_greedy(kind, WeightFormat::F32, ms);
                }
                if let Some(transitions) = &transitions {
                    let rows = time_decoders(model, aligned, bench, transitions)?;
                    push_decoders(kind, WeightFormat::F32, rows);
                }
            }
            EngineKind::Native | EngineKind::NativeBf16 | EngineKind::NativeInt8 => {
                for format in native_formats(kind) {
                    let Some(engine) = engines.iter().find(|(f, _)| *f == format).map(|(_, e)| e)
                    else {
                        continue;
                    };
                    let medians = forward_costs(engine, aligned, context, max_k, repeat)?;
                    push(kind, format, medians);
                    if bench.generate > 0 {
                        let ms = greedy_ms_per_token(
                            engine,
                            aligned,
                            context,
                            bench.generate,
                            greedy_repeat,
                        )?;
                        push_greedy(kind, format, ms);
                    }
                    if let Some(transitions) = &transitions {
                        let rows = time_decoders(engine, aligned, bench, transitions)?;
                        push_decoders(kind, format, rows);
                    }
                }
            }
        }
    }
    let f32_floor = &floors[0];
    Ok(ForwardReport {
        benchmark: "forward",
        config: run_config,
        parameters: model.num_params(),
        weight_mb: f32_floor.weight_mb,
        bandwidth_gbs,
        kernel: voxspec_engine::Kernel::detect().name(),
        floor_ms: f32_floor.floor_ms,
        results,
        device_bandwidth_gbs,
        burn_floor_ms,
        greedy,
        decoders,
        peer,
        floors,
    })
}

/// Transitions counted over one long pseudo-random code sequence: what Viterbi path selection
/// needs to run, not a language model of speech.
fn random_transitions(codebook: usize) -> Result<Transitions> {
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

/// AR and MTP with Viterbi (`bench.mtp_heads` heads, top 3) over `bench.generate` tokens on
/// `model`: `(label, ms per token)`, AR first.
fn time_decoders<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    bench: &ForwardBench,
    transitions: &Arc<Transitions>,
) -> Result<Vec<(String, f64)>> {
    let greedy = SamplerConfig::greedy();
    let repeat = bench.repeat.clamp(1, 5);
    let (context, tokens) = (bench.context, bench.generate);
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
        MtpDecoder::with_viterbi(bench.mtp_heads, ViterbiConfig::new(3), transitions.clone())?;
    let ms = decode_ms_per_token(model, &mut mtp, aligned, context, tokens, repeat, &greedy)?;
    Ok(vec![
        ("ar".into(), ar),
        (format!("mtp+viterbi k={} top_k=3", bench.mtp_heads), ms),
    ])
}
