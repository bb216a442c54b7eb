//! `voxspec bench codec`: encode and decode speed of a codec, as real-time factors (wall time
//! per second of audio; below 1 is faster than real time) and their inverse ("× real time").
//!
//! The audio is one clip of `--seconds`: the test (then dev) utterances of a prepared corpus
//! concatenated (repeated when the corpus is shorter), or, without `--data`, a deterministic
//! speech-like signal (a gliding harmonic source with syllable-rate bursts and noise). One
//! untimed encode and decode run first; each stage is then timed `--repeat` times, codes and
//! samples read back to the host inside the timing.

use std::path::PathBuf;

use clap::Args;
use voxspec_eval::bench_codec::{BenchAudio, run_codec_bench};

use crate::common::load_codec;

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

pub fn run(a: CodecBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.seconds.is_finite() && a.seconds > 0.0,
        "--seconds must be positive"
    );
    anyhow::ensure!(a.repeat > 0, "--repeat must be at least 1");
    let device = voxspec_train::device::single()?;
    let (config, model) = load_codec(&a.codec, &device)?;
    let rate = config.sample_rate;
    let n = (a.seconds * f64::from(rate)).round().max(1.0) as usize;
    let audio = BenchAudio::new(a.data.as_deref(), n, rate)?;
    println!(
        "codec {}: {} × {} codes at {} Hz; {:.2} s of {} audio at {rate} Hz, \
         {} thread(s), best of {}",
        a.codec.display(),
        model.n_q(),
        config.codebook_size,
        config.frame_rate(),
        n as f64 / f64::from(rate),
        audio.kind,
        rayon::current_num_threads(),
        a.repeat
    );
    let report = run_codec_bench(&model, &config, &a.codec, audio, a.repeat, &device)?;
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
