//! Throughput of the audio front end: decode, decode + resample and decode + resample + log-mel,
//! on one thread and on all threads, over the same files in one run (their ratios are
//! comparable even where absolute times are noisy).
//!
//! Throughput is reported as seconds of audio processed per second of wall time (the real-time
//! factor's inverse).

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use voxspec_audio::{AudioError, LogMel, MelConfig};
use voxspec_data::Progress;

use crate::error::{EvalError, Result};

/// One stage at one thread count.
#[derive(Debug, Clone, Serialize)]
pub struct AudioMeasurement {
    /// The stage ("decode", "decode+resample", "decode+resample+logmel").
    pub name: String,
    /// Threads it ran on.
    pub threads: usize,
    /// Fastest wall time over the repetitions (s).
    pub wall_seconds: f64,
    /// Audio seconds processed per second of wall time.
    pub audio_seconds_per_second: f64,
}

/// The JSON report of `voxspec bench audio`.
#[derive(Debug, Clone, Serialize)]
pub struct AudioBenchReport {
    /// `"audio"`.
    pub benchmark: &'static str,
    /// Files measured.
    pub files: usize,
    /// Their total duration.
    pub audio_seconds: f64,
    /// The resampling target rate.
    pub resample_to_hz: u32,
    /// Repetitions of each measurement (the fastest is reported).
    pub repeat: usize,
    /// CPU cores of the machine.
    pub cores: usize,
    /// Every stage single-threaded, then on all threads.
    pub results: Vec<AudioMeasurement>,
}

/// The audio files of `inputs` (files as given; directories searched recursively, in name
/// order, for the extensions of [`voxspec_data::corpus::AUDIO_EXTENSIONS`]), at most
/// `max_files`.
///
/// # Errors
/// [`EvalError::Io`] naming a directory that cannot be listed; [`EvalError::Input`] when no
/// file is found.
pub fn find_audio_files(inputs: &[PathBuf], max_files: usize) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for input in inputs {
        collect(input, &mut files)?;
    }
    files.truncate(max_files);
    if files.is_empty() {
        return Err(EvalError::input(format!(
            "no audio files found in {inputs:?}"
        )));
    }
    Ok(files)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let rd = std::fs::read_dir(path).map_err(|e| EvalError::io("listing", path, e))?;
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

fn best_of<F: Fn() -> Result<(), AudioError>>(repeat: usize, f: F) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        f()?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// Measures every stage on `files`, resampling to `rate`, the fastest of `repeat` runs each;
/// `progress` sees one unit per file while their durations are read first.
///
/// # Errors
/// [`EvalError::Audio`] for a file that cannot be decoded or resampled, or a rate the log-mel
/// front end refuses.
pub fn run_audio_bench(
    files: &[PathBuf],
    rate: u32,
    repeat: usize,
    progress: &dyn Progress,
) -> Result<AudioBenchReport> {
    progress.start(files.len() as u64, "measuring length");
    let mut audio_seconds = 0.0;
    for f in files {
        audio_seconds += voxspec_audio::load(f)?.duration_secs();
        progress.inc(1);
    }
    progress.finish();
    let mel = LogMel::new(MelConfig {
        sample_rate: rate,
        ..MelConfig::default()
    })?;
    let threads = rayon::current_num_threads();

    let decode = |f: &PathBuf| voxspec_audio::load(f).map(drop);
    let resample = |f: &PathBuf| voxspec_audio::load_resampled(f, rate).map(drop);
    let logmel =
        |f: &PathBuf| voxspec_audio::load_resampled(f, rate).map(|x| drop(mel.compute(&x.samples)));

    type Job<'a> = (
        &'a str,
        &'a (dyn Fn(&PathBuf) -> Result<(), AudioError> + Sync),
    );
    let jobs: [Job<'_>; 3] = [
        ("decode", &decode),
        ("decode+resample", &resample),
        ("decode+resample+logmel", &logmel),
    ];
    let mut results = Vec::new();
    for (name, job) in jobs {
        let serial = best_of(repeat, || files.iter().try_for_each(job))?;
        let parallel = best_of(repeat, || files.par_iter().try_for_each(job))?;
        for (t, wall) in [(1, serial), (threads, parallel)] {
            results.push(AudioMeasurement {
                name: name.to_string(),
                threads: t,
                wall_seconds: wall,
                audio_seconds_per_second: audio_seconds / wall,
            });
        }
    }
    Ok(AudioBenchReport {
        benchmark: "audio",
        files: files.len(),
        audio_seconds,
        resample_to_hz: rate,
        repeat,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        results,
    })
}
