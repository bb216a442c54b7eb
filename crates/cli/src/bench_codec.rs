//! `voxspec bench codec`: encode and decode speed of a codec, as real-time factors (wall time
//! per second of audio; below 1 is faster than real time) and their inverse ("× real time").
//!
//! The audio is one clip of `--seconds`: the test (then dev) utterances of a prepared corpus
//! concatenated (repeated when the corpus is shorter), or, without `--data`, a deterministic
//! speech-like signal (a gliding harmonic source with syllable-rate bursts and noise). One
//! untimed encode and decode run first; each stage is then timed `--repeat` times, codes and
//! samples read back to the host inside the timing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use burn::tensor::{Int, Tensor, TensorData};
use clap::Args;
use serde::Serialize;
use voxspec_data::read_manifest;

use crate::common::{load_codec, read_audio};

#[derive(Debug, Args)]
pub struct CodecBenchArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    codec: PathBuf,
    /// Prepared data directory whose test, then dev, utterances are concatenated into the
    /// benchmark audio; without it, speech-like synthetic audio is used.
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Seconds of audio encoded and decoded in one call.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Timed repetitions of each stage (after one untimed run); the fastest and the mean are
    /// reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-codec.json")]
    out: PathBuf,
}

#[derive(Debug, Serialize)]
struct StageResult {
    stage: &'static str,
    /// Fastest wall time (s).
    wall_seconds: f64,
    /// Mean wall time over the repetitions (s).
    wall_seconds_mean: f64,
    /// Fastest wall time / audio seconds.
    real_time_factor: f64,
    /// Audio seconds / fastest wall time.
    x_real_time: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    benchmark: &'static str,
    codec: PathBuf,
    /// `corpus` or `synthetic`.
    audio: &'static str,
    /// Where the audio came from, in words.
    audio_source: String,
    /// Corpus utterances concatenated (0 for synthetic audio).
    utterances: usize,
    audio_seconds: f64,
    sample_rate: u32,
    n_q: usize,
    codebook_size: usize,
    frame_rate: f32,
    frames: usize,
    threads: usize,
    cores: usize,
    repeat: usize,
    results: Vec<StageResult>,
}

/// Uniform noise in [-1, 1) from a 64-bit LCG.
fn lcg_noise(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 33) as f32 / (1u64 << 30) as f32) - 1.0
}

/// `n` samples of speech-like audio: a harmonic source whose f0 glides between 90 and 210 Hz,
/// gated at a syllable rate of about 4 Hz, with fricative-like noise between syllables.
fn synthetic(n: usize, rate: u32) -> Vec<f32> {
    let mut seed = 0x5eed_u64;
    let mut phase = 0.0f32;
    let tau = std::f32::consts::TAU;
    (0..n)
        .map(|i| {
            let t = i as f32 / rate as f32;
            let f0 = 150.0 + 60.0 * (tau * 0.37 * t).sin() * (tau * 1.3 * t).cos();
            phase = (phase + f0 / rate as f32).fract();
            let voiced: f32 = (1..=20)
                .map(|h| (tau * phase * h as f32).sin() / h as f32)
                .sum();
            let syllable = (tau * 4.1 * t).sin();
            let gate = syllable.max(0.0).powf(0.7);
            let hiss = (-syllable).max(0.0) * 0.25;
            0.25 * gate * voiced + (hiss + 0.01) * lcg_noise(&mut seed)
        })
        .collect()
}

/// `n` samples at `rate` from the test, then dev, utterances of `data` (repeated when short),
/// and the number of utterances used.
fn corpus_audio(data: &Path, n: usize, rate: u32) -> anyhow::Result<(Vec<f32>, usize)> {
    let mut utterances = Vec::new();
    for split in ["test", "dev"] {
        let path = data.join(format!("{split}.jsonl"));
        if path.is_file() {
            utterances.extend(read_manifest(&path)?);
        }
    }
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no test or dev utterances to benchmark on; leave out --data for synthetic audio",
        data.display()
    );
    let mut samples = Vec::with_capacity(n);
    let mut used = 0;
    for u in &utterances {
        if samples.len() >= n {
            break;
        }
        samples.extend(
            read_audio(Path::new(&u.path), rate).with_context(|| format!("utterance {}", u.id))?,
        );
        used += 1;
    }
    anyhow::ensure!(
        !samples.is_empty(),
        "the test and dev utterances of {} hold no audio",
        data.display()
    );
    let mut k = 0;
    while samples.len() < n {
        samples.push(samples[k]);
        k += 1;
    }
    samples.truncate(n);
    Ok((samples, used))
}

/// Runs `f` once untimed, then `repeat` times timed: (fastest, mean) seconds.
fn time<F: FnMut() -> anyhow::Result<()>>(repeat: usize, mut f: F) -> anyhow::Result<(f64, f64)> {
    f()?;
    let mut best = f64::INFINITY;
    let mut total = 0.0;
    for _ in 0..repeat {
        let t = Instant::now();
        f()?;
        let s = t.elapsed().as_secs_f64();
        best = best.min(s);
        total += s;
    }
    Ok((best, total / repeat as f64))
}

pub fn run(a: CodecBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.seconds.is_finite() && a.seconds > 0.0,
        "--seconds must be positive"
    );
    anyhow::ensure!(a.repeat > 0, "--repeat must be at least 1");
    let device = crate::device::single()?;
    let (config, model) = load_codec(&a.codec, &device)?;
    let rate = config.sample_rate;
    let n = (a.seconds * f64::from(rate)).round().max(1.0) as usize;
    let (samples, audio, audio_source, utterances) = match &a.data {
        Some(data) => {
            let (samples, used) = corpus_audio(data, n, rate)?;
            let source = format!(
                "{used} test/dev utterance(s) of {} concatenated",
                data.display()
            );
            (samples, "corpus", source, used)
        }
        None => (
            synthetic(n, rate),
            "synthetic",
            "speech-like synthetic signal (gliding harmonics, syllable gating, noise)".into(),
            0,
        ),
    };
    let audio_seconds = n as f64 / f64::from(rate);
    let n_q = model.n_q();
    let threads = rayon::current_num_threads();
    println!(
        "codec {}: {n_q} × {} codes at {} Hz; {audio_seconds:.2} s of {audio} audio at {rate} Hz, \
         {threads} thread(s), best of {}",
        a.codec.display(),
        config.codebook_size,
        config.frame_rate(),
        a.repeat
    );

    let wave: Tensor<3> = Tensor::from_data(TensorData::new(samples, [1, 1, n]), &device);
    let mut codes: Option<Tensor<3, Int>> = None;
    let encode = time(a.repeat, || {
        let c = model.encode(wave.clone(), n_q)?; // [n_q, 1, frames]
        c.to_data()
            .try_into_vec_as::<i64>()
            .map_err(|e| anyhow::anyhow!("reading the codes: {e:?}"))?;
        codes = Some(c);
        Ok(())
    })?;
    let codes = codes.context("the encoder produced no codes")?;
    let frames = codes.dims()[2];
    let decode = time(a.repeat, || {
        model
            .decode(codes.clone())? // [1, 1, frames · hop]
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| anyhow::anyhow!("reading the waveform: {e:?}"))?;
        Ok(())
    })?;
    let results: Vec<StageResult> = [("encode", encode), ("decode", decode)]
        .into_iter()
        .map(|(stage, (best, mean))| StageResult {
            stage,
            wall_seconds: best,
            wall_seconds_mean: mean,
            real_time_factor: best / audio_seconds,
            x_real_time: audio_seconds / best,
        })
        .collect();
    let report = Report {
        benchmark: "codec",
        codec: a.codec.clone(),
        audio,
        audio_source,
        utterances,
        audio_seconds,
        sample_rate: rate,
        n_q,
        codebook_size: config.codebook_size,
        frame_rate: config.frame_rate(),
        frames,
        threads,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        repeat: a.repeat,
        results,
    };
    println!(
        "{:<8} {:>10} {:>10} {:>8} {:>12}",
        "stage", "wall s", "mean s", "RTF", "× real time"
    );
    for r in &report.results {
        println!(
            "{:<8} {:>10.3} {:>10.3} {:>8.3} {:>12.1}",
            r.stage, r.wall_seconds, r.wall_seconds_mean, r.real_time_factor, r.x_real_time
        );
    }
    voxspec_data::write_atomic(&a.out, &serde_json::to_vec_pretty(&report)?)?;
    println!("wrote {}", a.out.display());
    Ok(())
}
