//! `voxspec serve`: the speech server (`voxspec-serve`) on a trained experiment or a
//! multi-stream LM.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use voxspec_serve::{Defaults, LoadConfig, ServerConfig, build_app, load_test, serve};
use voxspec_tts::{AnyPipeline, DecoderParts, ModelKind, ModelSource, MultiStreamPaths, Pipeline};

use crate::synth_args::{ModelArgs, SamplingArgs, SplitArgs, StreamArgs};

/// Serve speech over HTTP: `POST /v1/audio/speech` (OpenAI-style body: input, voice,
/// response_format wav|pcm, speed; plus decoder, heads, seed, temperature), `POST
/// /v1/voices?name=NAME` (body: an audio file) and `GET /v1/voices`, `GET /health`, `GET
/// /metrics` (Prometheus text).
///
/// One worker owns the models and runs up to --max-batch sequences at once (continuous
/// batching: requests admitted together share a batched AR decode; then each round advances every
/// streamed sequence and the oldest whole one by a chunk, and a finished one frees its slot at
/// once). `"stream": true` sends the
/// audio in chunks as they are made (see the Streaming options). Bad requests get a 4xx JSON
/// error naming the field. Ctrl-C or SIGTERM stops accepting connections and finishes the
/// requests in flight.
///
/// With a multi-stream LM as --model (`voxspec train multistream`), the server speaks with it,
/// its SoCodec (--codec, default: the one it was trained on) and --vocoder, in the voice of
/// --prompt; its decoders are ar, mtp and mtp-viterbi, each request is spoken whole and its
/// audio sent as one chunk.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    models: ModelArgs,
    /// The recording whose voice requests that name none (`default`) get. A multi-stream LM
    /// needs it (a recording, or a directory of recordings of one voice); a single-stream
    /// experiment without it speaks with no voice prompt.
    #[arg(long, value_name = "WAV")]
    prompt: Option<PathBuf>,
    #[command(flatten)]
    vocoding: crate::synth_args::VocoderArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// Decoder of requests that name none: ar, mtp, mtp-viterbi or self-spec.
    #[arg(long, default_value = "mtp")]
    decoder: String,
    /// Tokens per forward of requests that give no `heads`.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Candidates per head for Viterbi path selection.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// A voice clients can pick: NAME=FILE (a reference recording, encoded once at start).
    /// Repeat for several.
    #[arg(long, value_name = "NAME=FILE")]
    voice: Vec<String>,
    /// Most sequences running at once (continuous batching: a request takes a free slot at once;
    /// requests admitted together with the same decoder and sampler share one batched AR
    /// decode, each with its own seed).
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// Frames a whole (unstreamed) response advances per round.
    #[arg(long, value_name = "FRAMES", default_value_t = 100)]
    chunk_frames: usize,
    /// Milliseconds the worker waits for more requests after the first of a batch.
    #[arg(long, default_value_t = 5)]
    batch_wait_ms: u64,
    /// Longest accepted input text, characters (a text of several sentences is spoken
    /// sentence by sentence, so this bounds a request's work, not the model's context).
    #[arg(long, default_value_t = 20_000)]
    max_input_chars: usize,
    /// Largest accepted speech request body, bytes.
    #[arg(long, default_value_t = 65536)]
    max_body_bytes: usize,
    /// Largest accepted voice upload (`POST /v1/voices?name=NAME`, body: an audio file), bytes.
    #[arg(long, default_value_t = 10 << 20)]
    max_voice_bytes: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    streaming: StreamArgs,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let voices = args
        .voice
        .iter()
        .map(|v| match v.split_once('=') {
            Some((name, file)) if !name.is_empty() && !file.is_empty() => {
                Ok((name.to_string(), PathBuf::from(file)))
            }
            _ => bail!("--voice {v:?}: expected NAME=FILE"),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let device = voxspec_train::device::single()?;
    let paths = args.models.serving_paths();
    let kind = args
        .models
        .model
        .as_deref()
        .map_or(ModelKind::SingleStream, ModelKind::of_model_dir);
    let mut parts = DecoderParts::default();
    let source = match kind {
        ModelKind::SingleStream => {
            if paths.transitions.is_file() {
                parts.load_transitions(&paths.transitions, args.models.transition_weight)?;
            } else if args.decoder == "mtp-viterbi" {
                bail!(
                    "--decoder mtp-viterbi needs the transition matrix {} (`voxspec stats \
                     transitions`), or choose another --decoder",
                    paths.transitions.display()
                );
            }
            ModelSource::SingleStream(paths)
        }
        ModelKind::MultiStream => {
            let reference = args.prompt.as_deref().with_context(|| {
                format!(
                    "{} is a multi-stream LM: it speaks with the voice of a reference \
                     recording; pass --prompt <WAV> (or a directory of recordings of one voice)",
                    paths.ar.display()
                )
            })?;
            if !reference.exists() {
                bail!(
                    "--prompt {}: no such file or directory",
                    reference.display()
                );
            }
            if let Some(vocoder) = args.vocoding.vocoder()
                && !vocoder.join("config.json").is_file()
            {
                bail!(
                    "--vocoder {}: no vocoder there (no config.json); train one with `voxspec \
                     vocoder train`, or pass --griffin-lim",
                    vocoder.display()
                );
            }
            ModelSource::MultiStream(MultiStreamPaths {
                model: paths.ar.clone(),
                codec: args.models.codec.clone(),
                vocoder: args.vocoding.vocoder(),
                engine: paths.engine,
            })
        }
    };
    let pipeline = AnyPipeline::load(&source, &device)?;
    let config = ServerConfig {
        defaults: Defaults {
            decoder: args.decoder.clone(),
            heads: args.heads,
            top_k: args.top_k,
            // Greedy for the MTP AR model, sampling (1) for multi-stream LMs, as `synthesize`.
            sampler: args.sampling.config(match kind {
                ModelKind::SingleStream => 0.0,
                ModelKind::MultiStream => 1.0,
            })?,
            max_input_chars: args.max_input_chars,
            long_form: voxspec_tts::LongForm::default(),
            max_batch: args.max_batch,
            batch_wait: std::time::Duration::from_millis(args.batch_wait_ms),
            stream: args.streaming.config()?,
            chunk_frames: args.chunk_frames.max(1),
        },
        voices,
        default_voice: args.prompt.clone(),
        max_body_bytes: args.max_body_bytes,
        max_voice_bytes: args.max_voice_bytes,
    };
    let app = build_app(pipeline, parts, &config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&args.addr)
            .await
            .with_context(|| format!("listening on {}", args.addr))?;
        eprintln!(
            "serving a {} model on http://{} (POST /v1/audio/speech, GET /health, GET /metrics); \
             Ctrl-C stops",
            kind.name(),
            listener
                .local_addr()
                .map_or(args.addr.clone(), |a| a.to_string())
        );
        serve(listener, app, shutdown_signal()).await?;
        eprintln!("stopped");
        Ok(())
    })
}

/// Completes on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Load test of the server on loopback: for each --max-batch setting a server runs in this
/// process on 127.0.0.1 (an ephemeral port), and 1, 4, 16 (--clients) concurrent clients send
/// --requests requests each run (the first sentences of the split's transcripts, seed = request
/// index, 16-bit PCM). Reports throughput (audio seconds per wall second), time to first byte and
/// latency percentiles and the mean batch size per run; the settings side by side in one run
/// show what batching buys. Writes JSON.
#[derive(Debug, Args)]
pub struct ServeBenchArgs {
    #[command(flatten)]
    models: ModelArgs,
    #[command(flatten)]
    sentences: SplitArgs,
    /// Concurrent clients of each run.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    clients: Vec<usize>,
    /// Requests per run.
    #[arg(long, default_value_t = 16)]
    requests: usize,
    /// Server batch limits to compare (1: one request at a time).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    max_batch: Vec<usize>,
    /// Milliseconds the worker waits for more requests after the first of a batch.
    #[arg(long, default_value_t = 5)]
    batch_wait_ms: u64,
    /// Decoder every request names.
    #[arg(long, default_value = "mtp")]
    decoder: String,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-serve.json")]
    out: PathBuf,
    /// Requests ask for streamed audio: the time to first byte is then the first chunk's.
    #[arg(long)]
    stream: bool,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    streaming: StreamArgs,
}

pub fn bench(args: ServeBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.clients.is_empty() && !args.clients.contains(&0),
        "--clients needs values of at least 1"
    );
    anyhow::ensure!(
        !args.max_batch.is_empty() && !args.max_batch.contains(&0),
        "--max-batch needs values of at least 1"
    );
    anyhow::ensure!(args.requests > 0, "--requests must be at least 1");
    let sentences: Vec<String> = args
        .sentences
        .read(&args.models.exp)?
        .1
        .into_iter()
        .take(args.requests)
        .map(|u| u.text)
        .collect();
    let device = voxspec_train::device::single()?;
    let paths = args.models.serving_paths();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let cpu = voxspec_tts::cpu_model();
    eprintln!(
        "{cpu} ({} threads), engine {}",
        rayon::current_num_threads(),
        paths.engine.name()
    );
    let mut runs = Vec::new();
    for &max_batch in &args.max_batch {
        let pipeline = Pipeline::load(&paths, &device)?;
        let mut parts = DecoderParts::default();
        if paths.transitions.is_file() {
            parts.load_transitions(&paths.transitions, args.models.transition_weight)?;
        }
        let config = ServerConfig {
            defaults: Defaults {
                decoder: args.decoder.clone(),
                sampler: args.sampling.config(0.0)?,
                max_batch,
                batch_wait: std::time::Duration::from_millis(args.batch_wait_ms),
                stream: args.streaming.config()?,
                ..Defaults::default()
            },
            ..ServerConfig::default()
        };
        let app = build_app(pipeline, parts, &config)?;
        let loads: Vec<LoadConfig> = args
            .clients
            .iter()
            .map(|&clients| LoadConfig {
                clients,
                requests: args.requests,
                sentences: sentences.clone(),
                decoder: args.decoder.clone(),
                timeout: std::time::Duration::from_secs(600),
                stream: args.stream,
            })
            .collect();
        load_test(&runtime, app, &loads, &mut |load, report| {
            eprintln!(
                "max batch {max_batch:>2}, {:>2} clients: {:.2} audio s/s, TTFB p50 {:.2} s \
                 p95 {:.2} s, latency p95 {:.2} s, mean batch {:.1}",
                load.clients,
                report.throughput,
                report.ttfb_p50,
                report.ttfb_p95,
                report.latency_p95,
                report.mean_batch
            );
            runs.push(serde_json::json!({ "max_batch": max_batch, "report": report }));
        })?;
    }
    let report = serde_json::json!({
        "benchmark": "serve",
        "cpu": cpu,
        "decoder": args.decoder,
        "engine": paths.engine,
        "requests_per_run": args.requests,
        "batch_wait_ms": args.batch_wait_ms,
        "threads": rayon::current_num_threads(),
        "stream": args.stream,
        "note": if args.stream {
            "streamed responses: time to first byte is the first chunk of audio"
        } else {
            "whole responses: time to first byte is the latency"
        },
        "runs": runs,
    });
    voxspec_data::write_atomic(&args.out, serde_json::to_string_pretty(&report)?.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
