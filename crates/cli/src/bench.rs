//! `voxspec bench audio`: decode, resample and log-mel throughput, as JSON (the model
//! benchmarks `train` and `forward` live in `bench_model.rs`, `acceptance` in
//! `bench_accept.rs`, `codec` in `bench_codec.rs`, `pipeline` in `bench_pipeline.rs`).
//!
//! Throughput is reported as seconds of audio processed per second of wall time (the
//! real-time factor's inverse). All variants run in one invocation over the same files, so
//! their ratios are comparable even where absolute times are noisy.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use voxspec_eval::bench_audio::{find_audio_files, run_audio_bench};

use crate::progress::Bar;

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Audio front end: decode, decode+resample, log-mel (single thread and all threads).
    Audio(AudioBenchArgs),
    /// Training throughput (tokens/s) of the transformer core on a GPT-2-like causal LM,
    /// through the shared training loop, with its ratio to PyTorch on the same machine.
    Train(crate::bench_model::TrainBenchArgs),
    /// Cost of one KV-cached forward over k new tokens relative to k = 1 (k = 1..8): what
    /// multi-token and speculative decoding can gain on this backend.
    Forward(crate::bench_model::ForwardBenchArgs),
    /// Offline acceptance rate and expected tokens per step of speculative decoding, from
    /// teacher-forced logits (no decoding).
    Acceptance(crate::bench_accept::AcceptanceArgs),
    /// Every decoder on a split's sentences in one run: time per token, speedup over AR,
    /// tokens per forward, acceptance, CER of the synthesised audio by the CTC teacher and the
    /// target's NLL; JSON, a markdown table and PNG plots.
    Decode(Box<crate::bench_decode::DecodeBenchArgs>),
    /// The delayed multi-stream LM's frame decoders (AR, speculative) on a split's sentences:
    /// LM real-time factor, time per frame, frames per forward, acceptance, CER and forced
    /// choice; optionally beside the main job's single-stream AR model in the same run.
    Multistream(Box<crate::bench_multistream::MultiStreamBenchArgs>),
    /// Codec encode and decode speed: real-time factors on 10 s of speech (or speech-like
    /// synthetic audio).
    Codec(crate::bench_codec::CodecBenchArgs),
    /// Load test of the speech server on loopback: throughput, time to first byte and latency
    /// with 1, 4 and 16 clients, one request at a time against batched.
    Serve(crate::serve::ServeBenchArgs),
    /// The whole request, text to audio: each stage's share of the wall time (text front end,
    /// AR, NAR, codec), real-time factor and streamed time to first audio (p50/p95), for short
    /// sentences and paragraphs in one run, with the CPU named.
    Pipeline(Box<crate::bench_pipeline::PipelineBenchArgs>),
}

#[derive(Debug, Args)]
pub struct AudioBenchArgs {
    /// Audio files or directories (searched recursively for wav/flac/mp3/ogg).
    #[arg(default_value = "datasets/minitts")]
    inputs: Vec<PathBuf>,
    /// Resampling target rate in Hz.
    #[arg(long, default_value_t = 24000)]
    rate: u32,
    /// Use at most this many files.
    #[arg(long, default_value_t = 200)]
    max_files: usize,
    /// Repetitions of each measurement; the fastest is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-audio.json")]
    out: PathBuf,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Audio(a) => audio(a),
        BenchCommand::Train(a) => crate::bench_model::run_train(a),
        BenchCommand::Forward(a) => crate::bench_model::run_forward(a),
        BenchCommand::Acceptance(a) => crate::bench_accept::run(a),
        BenchCommand::Decode(a) => crate::bench_decode::run(*a),
        BenchCommand::Multistream(a) => crate::bench_multistream::run(*a),
        BenchCommand::Codec(a) => crate::bench_codec::run(a),
        BenchCommand::Serve(a) => crate::serve::bench(a),
        BenchCommand::Pipeline(a) => crate::bench_pipeline::run(*a),
    }
}

fn audio(a: AudioBenchArgs) -> anyhow::Result<()> {
    let files = find_audio_files(&a.inputs, a.max_files)?;
    let report = run_audio_bench(&files, a.rate, a.repeat, &Bar::new())?;
    println!(
        "{} files, {:.1} s of audio, resampling to {} Hz (best of {})",
        report.files, report.audio_seconds, a.rate, a.repeat
    );
    println!(
        "{:<24} {:>7} {:>10} {:>16}",
        "stage", "threads", "wall s", "audio s / s"
    );
    for m in &report.results {
        println!(
            "{:<24} {:>7} {:>10.3} {:>16.1}",
            m.name, m.threads, m.wall_seconds, m.audio_seconds_per_second
        );
    }
    voxspec_data::write_atomic(&a.out, &serde_json::to_vec_pretty(&report)?)?;
    println!("wrote {}", a.out.display());
    Ok(())
}
