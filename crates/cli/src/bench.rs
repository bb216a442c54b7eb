//! `voxspec bench audio`: decode, resample and log-mel throughput, as JSON (the model
//! benchmarks `train` and `forward` live in `bench_model.rs`, `acceptance` in
//! `bench_accept.rs`, `codec` in `bench_codec.rs`).
//!
//! Throughput is reported as seconds of audio processed per second of wall time (the
//! real-time factor's inverse). All variants run in one invocation over the same files, so
//! their ratios are comparable even where absolute times are noisy.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Subcommand};
use rayon::prelude::*;
use serde::Serialize;
use voxspec_audio::{LogMel, MelConfig};
use voxspec_data::Progress;

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

#[derive(Debug, Serialize)]
struct Measurement {
    name: String,
    threads: usize,
    wall_seconds: f64,
    audio_seconds_per_second: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    benchmark: &'static str,
    files: usize,
    audio_seconds: f64,
    resample_to_hz: u32,
    repeat: usize,
    cores: usize,
    results: Vec<Measurement>,
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let rd = std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?;
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, out)?;
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| voxspec_data::corpus::AUDIO_EXTENSIONS.contains(&e))
        {
            out.push(p);
        }
    }
    Ok(())
}

fn best_of<F: Fn() -> anyhow::Result<()>>(repeat: usize, f: F) -> anyhow::Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
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
    }
}

fn audio(a: AudioBenchArgs) -> anyhow::Result<()> {
    let mut files = Vec::new();
    for i in &a.inputs {
        collect(i, &mut files)?;
    }
    files.truncate(a.max_files);
    anyhow::ensure!(!files.is_empty(), "no audio files found in {:?}", a.inputs);

    let bar = Bar::with_len(files.len() as u64, "measuring length");
    let mut audio_seconds = 0.0;
    for f in &files {
        audio_seconds += voxspec_audio::load(f)?.duration_secs();
        bar.inc(1);
    }
    bar.finish();
    let mel = LogMel::new(MelConfig {
        sample_rate: a.rate,
        ..MelConfig::default()
    })?;
    let threads = rayon::current_num_threads();
    let rate = a.rate;

    let decode = |f: &PathBuf| voxspec_audio::load(f).map(drop);
    let resample = |f: &PathBuf| voxspec_audio::load_resampled(f, rate).map(drop);
    let logmel =
        |f: &PathBuf| voxspec_audio::load_resampled(f, rate).map(|x| drop(mel.compute(&x.samples)));

    type Job<'a> = (
        &'a str,
        &'a (dyn Fn(&PathBuf) -> Result<(), voxspec_audio::AudioError> + Sync),
    );
    let jobs: [Job<'_>; 3] = [
        ("decode", &decode),
        ("decode+resample", &resample),
        ("decode+resample+logmel", &logmel),
    ];
    let mut results = Vec::new();
    for (name, job) in jobs {
        let serial = best_of(a.repeat, || {
            files.iter().try_for_each(job).map_err(anyhow::Error::from)
        })?;
        let parallel = best_of(a.repeat, || {
            files
                .par_iter()
                .try_for_each(job)
                .map_err(anyhow::Error::from)
        })?;
        for (t, wall) in [(1, serial), (threads, parallel)] {
            results.push(Measurement {
                name: name.to_string(),
                threads: t,
                wall_seconds: wall,
                audio_seconds_per_second: audio_seconds / wall,
            });
        }
    }
    let report = Report {
        benchmark: "audio",
        files: files.len(),
        audio_seconds,
        resample_to_hz: a.rate,
        repeat: a.repeat,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        results,
    };
    println!(
        "{} files, {:.1} s of audio, resampling to {} Hz (best of {})",
        report.files, audio_seconds, a.rate, a.repeat
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
