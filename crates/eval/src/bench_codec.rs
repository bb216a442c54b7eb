//! Encode and decode speed of a codec, as real-time factors (wall time per second of audio;
//! below 1 is faster than real time) and their inverse ("× real time").
//!
//! The audio is one clip: the test (then dev) utterances of a prepared corpus concatenated
//! (repeated when the corpus is shorter), or a deterministic speech-like signal (a gliding
//! harmonic source with syllable-rate bursts and noise). One untimed encode and decode run
//! first; each stage is then timed `repeat` times, codes and samples read back to the host
//! inside the timing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::Serialize;
use voxspec_codec::{SpeechTokenizer, SpeechTokenizerConfig};

use crate::error::{EvalError, Result};

/// One stage's timing.
#[derive(Debug, Clone, Serialize)]
pub struct StageResult {
    /// `encode` or `decode`.
    pub stage: &'static str,
    /// Fastest wall time (s).
    pub wall_seconds: f64,
    /// Mean wall time over the repetitions (s).
    pub wall_seconds_mean: f64,
    /// Fastest wall time / audio seconds.
    pub real_time_factor: f64,
    /// Audio seconds / fastest wall time.
    pub x_real_time: f64,
}

/// The JSON report of `voxspec bench codec`.
#[derive(Debug, Clone, Serialize)]
pub struct CodecBenchReport {
    /// `"codec"`.
    pub benchmark: &'static str,
    /// The codec's directory.
    pub codec: PathBuf,
    /// `corpus` or `synthetic`.
    pub audio: &'static str,
    /// Where the audio came from, in words.
    pub audio_source: String,
    /// Corpus utterances concatenated (0 for synthetic audio).
    pub utterances: usize,
    /// Duration of the clip.
    pub audio_seconds: f64,
    /// The codec's sample rate.
    pub sample_rate: u32,
    /// Codebooks used.
    pub n_q: usize,
    /// Codes per codebook.
    pub codebook_size: usize,
    /// Code frames per second.
    pub frame_rate: f32,
    /// Code frames of the clip.
    pub frames: usize,
    /// Worker threads.
    pub threads: usize,
    /// CPU cores of the machine.
    pub cores: usize,
    /// Timed repetitions per stage.
    pub repeat: usize,
    /// Encode, then decode.
    pub results: Vec<StageResult>,
}

/// The clip a codec is measured on.
#[derive(Debug, Clone)]
pub struct BenchAudio {
    /// Its samples.
    pub samples: Vec<f32>,
    /// `corpus` or `synthetic`.
    pub kind: &'static str,
    /// Where it came from, in words.
    pub source: String,
    /// Corpus utterances concatenated (0 for synthetic audio).
    pub utterances: usize,
}

impl BenchAudio {
    /// `n` samples at `rate`: from the test, then dev, utterances of the prepared corpus
    /// `data` (repeated when short), or without it [`synthetic_speech`].
    ///
    /// # Errors
    /// [`EvalError::Input`] when `data` has no test or dev utterance or they hold no audio;
    /// [`EvalError::Utterance`] naming an utterance whose audio cannot be read; the manifests'.
    pub fn new(data: Option<&Path>, n: usize, rate: u32) -> Result<Self> {
        let Some(data) = data else {
            return Ok(Self {
                samples: synthetic_speech(n, rate),
                kind: "synthetic",
                source: "speech-like synthetic signal (gliding harmonics, syllable gating, noise)"
                    .into(),
                utterances: 0,
            });
        };
        let (samples, used) = corpus_audio(data, n, rate)?;
        Ok(Self {
            samples,
            kind: "corpus",
            source: format!(
                "{used} test/dev utterance(s) of {} concatenated",
                data.display()
            ),
            utterances: used,
        })
    }
}

/// Uniform noise in [-1, 1) from a 64-bit LCG.
fn lcg_noise(seed: &mut u64) -> f32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 33) as f32 / (1u64 << 30) as f32) - 1.0
}

/// `n` samples of speech-like audio at `rate`: a harmonic source whose f0 glides between 90
/// and 210 Hz, gated at a syllable rate of about 4 Hz, with fricative-like noise between
/// syllables. Deterministic.
pub fn synthetic_speech(n: usize, rate: u32) -> Vec<f32> {
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
fn corpus_audio(data: &Path, n: usize, rate: u32) -> Result<(Vec<f32>, usize)> {
    let mut utterances = Vec::new();
    for split in ["test", "dev"] {
        utterances.extend(voxspec_data::read_split_if_present(data, split)?);
    }
    if utterances.is_empty() {
        return Err(EvalError::input(format!(
            "{} has no test or dev utterances to benchmark on; leave out --data for synthetic \
             audio",
            data.display()
        )));
    }
    let mut samples = Vec::with_capacity(n);
    let mut used = 0;
    for u in &utterances {
        if samples.len() >= n {
            break;
        }
        let path = Path::new(&u.path);
        let audio = voxspec_audio::load_resampled(path, rate).map_err(|e| {
            EvalError::from(e)
                .context(format!("{} is not readable audio", path.display()))
                .of(&u.id)
        })?;
        samples.extend(audio.samples);
        used += 1;
    }
    if samples.is_empty() {
        return Err(EvalError::input(format!(
            "the test and dev utterances of {} hold no audio",
            data.display()
        )));
    }
    let mut k = 0;
    while samples.len() < n {
        samples.push(samples[k]);
        k += 1;
    }
    samples.truncate(n);
    Ok((samples, used))
}

/// Runs `f` once untimed, then `repeat` times timed: (fastest, mean) seconds and the last
/// result.
fn time<T>(repeat: usize, mut f: impl FnMut() -> Result<T>) -> Result<((f64, f64), T)> {
    let mut last = f()?;
    let mut best = f64::INFINITY;
    let mut total = 0.0;
    for _ in 0..repeat {
        let t = Instant::now();
        last = f()?;
        let s = t.elapsed().as_secs_f64();
        best = best.min(s);
        total += s;
    }
    Ok(((best, total / repeat.max(1) as f64), last))
}

fn readback(what: &'static str, e: impl std::fmt::Debug) -> EvalError {
    EvalError::Readback {
        what,
        detail: format!("{e:?}"),
    }
}

/// Times `model` (configured by `config`, loaded from `codec`) encoding `audio` with every
/// codebook and decoding the codes back, `repeat` times each after an untimed run, on
/// `device`.
///
/// # Errors
/// [`EvalError::Input`] for a zero `repeat` or an empty clip; [`EvalError::Codec`] when the
/// codec fails; [`EvalError::Readback`] when its output cannot be read back.
pub fn run_codec_bench(
    model: &SpeechTokenizer,
    config: &SpeechTokenizerConfig,
    codec: &Path,
    audio: BenchAudio,
    repeat: usize,
    device: &Device,
) -> Result<CodecBenchReport> {
    if repeat == 0 {
        return Err(EvalError::input(
            "the benchmark needs at least one repetition",
        ));
    }
    let n = audio.samples.len();
    if n == 0 {
        return Err(EvalError::input("the benchmark clip has no samples"));
    }
    let rate = config.sample_rate;
    let audio_seconds = n as f64 / f64::from(rate);
    let n_q = model.n_q();
    let wave: Tensor<3> = Tensor::from_data(TensorData::new(audio.samples, [1, 1, n]), device);
    let (encode, codes) = time(repeat, || {
        let c = model.encode(wave.clone(), n_q)?; // [n_q, 1, frames]
        c.to_data()
            .try_into_vec_as::<i64>()
            .map_err(|e| readback("the codes", e))?;
        Ok::<Tensor<3, Int>, EvalError>(c)
    })?;
    let frames = codes.dims()[2];
    let (decode, ()) = time(repeat, || {
        model
            .decode(codes.clone())? // [1, 1, frames · hop]
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| readback("the waveform", e))?;
        Ok(())
    })?;
    let results = [("encode", encode), ("decode", decode)]
        .into_iter()
        .map(|(stage, (best, mean))| StageResult {
            stage,
            wall_seconds: best,
            wall_seconds_mean: mean,
            real_time_factor: best / audio_seconds,
            x_real_time: audio_seconds / best,
        })
        .collect();
    Ok(CodecBenchReport {
        benchmark: "codec",
        codec: codec.to_path_buf(),
        audio: audio.kind,
        audio_source: audio.source,
        utterances: audio.utterances,
        audio_seconds,
        sample_rate: rate,
        n_q,
        codebook_size: config.codebook_size,
        frame_rate: config.frame_rate(),
        frames,
        threads: rayon::current_num_threads(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        repeat,
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_speech_is_deterministic_and_bounded() {
        let a = synthetic_speech(24_000, 24_000);
        assert_eq!(a, synthetic_speech(24_000, 24_000));
        assert!(a.iter().all(|x| x.is_finite() && x.abs() < 1.0));
        assert!(a.iter().any(|&x| x != 0.0));
    }

    #[test]
    fn a_corpus_without_test_or_dev_utterances_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = BenchAudio::new(Some(dir.path()), 100, 16_000).unwrap_err();
        assert!(
            err.to_string().contains("no test or dev utterances"),
            "{err}"
        );
        let synthetic = BenchAudio::new(None, 100, 16_000).unwrap();
        assert_eq!(
            (synthetic.samples.len(), synthetic.kind),
            (100, "synthetic")
        );
    }
}
