//! `voxspec serve`: the speech server (`voxspec-serve`) on a trained experiment.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use voxspec_serve::{Defaults, ServerConfig, build_app, serve};
use voxspec_tts::{DecoderParts, Pipeline};

use crate::synth::{ModelArgs, SamplingArgs};

/// Serve speech over HTTP: `POST /v1/audio/speech` (OpenAI-style body: input, voice,
/// response_format wav|pcm, speed; plus decoder, heads, seed, temperature), `GET /health`,
/// `GET /metrics` (Prometheus text).
///
/// One worker owns the models and decodes the requests waiting for it (up to --max-batch, same
/// decoder and sampler) as one batch; bad requests get a 4xx JSON error naming the field. Ctrl-C
/// or SIGTERM stops accepting connections and finishes the requests in flight. Streaming
/// responses are not built yet.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    models: ModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// Decoder of requests that name none: ar, mtp, mtp-viterbi or self-spec.
    #[arg(long, default_value = "mtp-viterbi")]
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
    /// Most requests decoded together (waiting requests with the same decoder and sampler form
    /// one batch; each keeps its own seed).
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// Milliseconds the worker waits for more requests after the first of a batch.
    #[arg(long, default_value_t = 5)]
    batch_wait_ms: u64,
    /// Longest accepted input text, characters.
    #[arg(long, default_value_t = 1000)]
    max_input_chars: usize,
    /// Largest accepted request body, bytes.
    #[arg(long, default_value_t = 65536)]
    max_body_bytes: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
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
    let device = crate::device::single()?;
    let paths = args.models.paths();
    let pipeline = Pipeline::load(&paths, &device)?;
    let mut parts = DecoderParts::default();
    if paths.transitions.is_file() {
        parts.load_transitions(&paths.transitions)?;
    } else if args.decoder == "mtp-viterbi" {
        bail!(
            "--decoder mtp-viterbi needs the transition matrix {} (`voxspec stats transitions`), \
             or choose another --decoder",
            paths.transitions.display()
        );
    }
    let config = ServerConfig {
        defaults: Defaults {
            decoder: args.decoder.clone(),
            heads: args.heads,
            top_k: args.top_k,
            sampler: args.sampling.config()?,
            max_input_chars: args.max_input_chars,
            max_batch: args.max_batch,
            batch_wait: std::time::Duration::from_millis(args.batch_wait_ms),
        },
        voices,
        max_body_bytes: args.max_body_bytes,
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
            "serving on http://{} (POST /v1/audio/speech, GET /health, GET /metrics); Ctrl-C stops",
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
