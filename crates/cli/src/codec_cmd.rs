//! `voxspec codec train | encode | decode | extract | eval`: the SpeechTokenizer codec through
//! the one training loop, single-file encoding/decoding, token stores of a prepared corpus, and
//! resynthesis quality (`eval`, in `codec_eval.rs`).
//!
//! A codec model directory holds `config.json` (`"kind": "speechtokenizer"`, the model config
//! under `model`) and `model.safetensors` (tensor names = module paths), loaded strictly: a
//! config that does not match its weights fails naming every tensor and shape that differs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::{Context, bail};
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use clap::{Args, Subcommand, ValueEnum};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use voxspec_codec::losses::resample_frames;
use voxspec_codec::speechtokenizer::train::{
    CodecData, CodecTrainConfig, CodecTrainTask, CodecUtterance,
};
use voxspec_codec::speechtokenizer::{DiscriminatorsConfig, SeanetConfig};
use voxspec_codec::{SpeechTokenizer, SpeechTokenizerConfig};
use voxspec_data::{Codes, Progress, TokenStoreMeta, TokenStoreWriter, Utterance};
use voxspec_teacher::FeatureStoreReader;
use voxspec_train::{TrainObserver, Trainer};

use crate::progress::Bar;
use crate::socodec_cmd::{CodecKind, is_socodec};
use crate::train_cmd::read_split;
use crate::train_loop::{LoopArgs, StepBar, install_ctrl_c};

/// Name of the codes tensor in the files `codec encode` writes.
const CODES_TENSOR: &str = "codes";

/// The codec subcommands (each one's help comes from its arguments' documentation).
#[derive(Debug, Subcommand)]
pub enum CodecCommand {
    Train(TrainArgs),
    Encode(EncodeArgs),
    Decode(DecodeArgs),
    Extract(ExtractArgs),
    Eval(crate::codec_eval::EvalArgs),
    PlotStreams(crate::socodec_cmd::StreamsPlotArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Preset {
    /// Width 4, latent 16, 4 × 32 codes, hop 320: for tests and smoke runs.
    Tiny,
    /// Width 16, latent 128, 8 × 256 codes, hop 320 (50 Hz): sized for 2 CPU cores.
    Small,
    /// The published SpeechTokenizer: width 32, latent 1024, 8 × 1024 codes.
    Base,
}

impl Preset {
    fn config(self) -> SpeechTokenizerConfig {
        match self {
            Preset::Tiny => SpeechTokenizerConfig::new()
                .with_seanet(
                    SeanetConfig::new()
                        .with_n_filters(4)
                        .with_dimension(16)
                        .with_lstm_layers(1),
                )
                .with_n_q(4)
                .with_codebook_size(32)
                .with_kmeans_iters(2),
            Preset::Small => SpeechTokenizerConfig::small(),
            Preset::Base => SpeechTokenizerConfig::speechtokenizer_base(),
        }
    }
}

/// Train a SpeechTokenizer codec on a prepared corpus.
///
/// SEANet encoder + BiLSTM, residual vector quantizer, SEANet
/// decoder; mel, waveform L1 and commitment losses, plus distillation of RVQ-1 towards
/// semantic-teacher features when --teacher-features is given (the output of `voxspec
/// teacher extract`; its frames are brought to the codec's frame rate, 50 Hz at hop 320, by
/// linear interpolation when the rates differ). --adversarial adds MPD + MSD discriminators
/// (a generator and a discriminator phase per step).
///
/// Reads <DATA>/train.jsonl (and dev.jsonl for validation); audio is resampled to the codec's
/// rate. Writes into <OUT>: run.json (the run settings) at the start; metrics.jsonl and TensorBoard events while
/// training; checkpoint-NNNNNN/ every --checkpoint-every steps; at the end (or on Ctrl-C) the
/// codec model directory: config.json ("kind": "speechtokenizer") + model.safetensors, which
/// `codec encode|decode|extract --codec <OUT>` load.
///
/// Ctrl-C finishes the current step, writes a checkpoint and the model, and exits 0 (a second
/// Ctrl-C exits at once). `--resume` continues from the newest checkpoint with the saved task
/// settings; a run directory with checkpoints is not reused without it.
#[derive(Debug, Args)]
#[command(mut_arg("batch", |a| a.default_value("4")))]
pub struct TrainArgs {
    /// Prepared data directory (train.jsonl, optional dev.jsonl).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Teacher feature stores (`voxspec teacher extract` output) for semantic distillation.
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher_features: Option<PathBuf>,
    /// Run directory.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Model size.
    #[arg(long, value_enum, default_value = "small")]
    pub(crate) preset: Preset,
    /// Seconds per training segment (rounded down to whole frames).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) segment: f64,
    /// Train with MPD + MSD discriminators (slower; two phases per step).
    #[arg(long)]
    pub(crate) adversarial: bool,
    /// Start from this trained codec (a `codec train` output) instead of fresh weights:
    /// fine-tuning on a new voice. Its config replaces --preset; the semantic dimension must
    /// match --teacher-features.
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub(crate) init: Option<PathBuf>,
    /// With --init: train the decoder only. The encoder and the codebooks stay as they are, so
    /// the codes (and every language model trained on them) keep their meaning while the audio
    /// made from them improves.
    #[arg(long, requires = "init")]
    pub(crate) decoder_only: bool,
    /// Codec family: the SpeechTokenizer-style waveform codec, or SoCodec (teacher features →
    /// ordered token streams → log-mel; needs --teacher-features and, to make audio, a vocoder).
    #[arg(long, value_enum, default_value = "speechtokenizer")]
    pub(crate) kind: crate::socodec_cmd::CodecKind,
    /// SoCodec: token streams (4 at 120 ms and 8 at 240 ms in the paper).
    #[arg(long, default_value_t = 4, help_heading = "SoCodec")]
    pub(crate) streams: usize,
    /// SoCodec: token frame shift in ms, a multiple of the 20 ms features (40, 120, 240).
    #[arg(long, default_value_t = 120, help_heading = "SoCodec")]
    pub(crate) frame_ms: usize,
    /// SoCodec: quantizer (opq: ordered, with nested dropout; pq: the same without; rq: residual).
    #[arg(long, value_enum, default_value = "opq", help_heading = "SoCodec")]
    pub(crate) quantizer: crate::socodec_cmd::QuantizerArg,
    /// SoCodec: entries K of each sub-codebook (a stream has K² tokens; default: the preset's,
    /// 128 for small and base, so 16,384 per stream as in the paper).
    #[arg(long, value_name = "K", help_heading = "SoCodec")]
    pub(crate) sub_codebook: Option<usize>,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

/// Encode one audio file into RVQ codes (a safetensors file).
///
/// The audio (any format voxspec-audio reads) is resampled to the codec's rate and encoded
/// into the codes of the first --n-q RVQ layers: a safetensors file with one I64 tensor "codes"
/// [n_q, frames] and metadata format=voxspec-codes, sample_rate, frame_rate, hop,
/// codebook_size, samples.
#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Input audio file.
    pub(crate) input: PathBuf,
    /// Output codes file.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// RVQ layers to keep (default: all).
    #[arg(long, value_name = "K")]
    pub(crate) n_q: Option<usize>,
    /// SoCodec: the CTC teacher whose hidden states the codec reads.
    #[arg(long, value_name = "DIR", default_value = crate::eval_cmd::DEFAULT_TEACHER)]
    pub(crate) teacher: PathBuf,
}

/// Decode a codes file written by `codec encode` back to a WAV file.
///
/// The WAV is written at the codec's sample rate
/// (float 32-bit PCM; trimmed to the encoded length when the file records it).
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Input codes file.
    pub(crate) input: PathBuf,
    /// Output WAV file.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// Sample format: 16-bit PCM (every WAV reader opens it) or 32-bit float.
    #[arg(long, value_enum, default_value = "pcm16")]
    pub(crate) format: crate::audio_cmd::FormatArg,
    /// SoCodec: the recording whose voice (global embedding) the speech gets (≥ 1 s).
    #[arg(long, value_name = "AUDIO")]
    pub(crate) reference: Option<PathBuf>,
    /// SoCodec: decode from the first N streams only (the rest zeroed).
    #[arg(long, value_name = "N")]
    pub(crate) streams: Option<usize>,
    /// SoCodec: the vocoder that renders the log-mel (`voxspec vocoder train` output).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_VOCODER)]
    pub(crate) vocoder: PathBuf,
    /// SoCodec: render with Griffin-Lim instead of the vocoder (fallback; buzzy).
    #[arg(long)]
    pub(crate) griffin_lim: bool,
}

/// The vocoder shipped with voxspec (trained on the bundled corpus).
pub(crate) const DEFAULT_VOCODER: &str = "checkpoints/vocoder-minitts";

/// Write token stores (RVQ codes) for every split of a prepared corpus.
///
/// Every utterance of the train, dev and test splits goes into
/// <OUT>/<split>-NNNNN.safetensors (read with voxspec_data::TokenStore), codes [n_q, frames]
/// per utterance id. Audio is read in parallel batches and resampled to the codec's rate; each
/// utterance is encoded at its own length. Every utterance's frame count must equal
/// ceil(samples / hop) and agree (±1 frame) with its manifest duration, or extraction stops
/// naming the utterance. Finished shards are kept: rerunning after an interruption encodes
/// only the utterances not in the store yet.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Prepared data directory (train.jsonl, dev.jsonl, test.jsonl).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Output directory of the token shards.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// RVQ layers to keep (default: all).
    #[arg(long, value_name = "K")]
    pub(crate) n_q: Option<usize>,
    /// Splits to extract (comma separated; a split without a manifest is skipped).
    #[arg(long, value_delimiter = ',', default_value = "train,dev,test")]
    pub(crate) splits: Vec<String>,
    /// Utterances whose audio is read in parallel per batch.
    #[arg(long, default_value_t = 16)]
    pub(crate) batch: usize,
    /// Utterances per shard flush (frames per shard before a new shard starts).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) shard_frames: usize,
    /// SoCodec: teacher feature stores of the splits (`voxspec teacher extract` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher_features: Option<PathBuf>,
    /// SoCodec, data augmentation: also encode every training utterance on N − 1 other token
    /// grids, its first s teacher frames dropped (s = 1..N−1, at most the teacher frames per
    /// token frame), stored as `<id>@<ms>ms`; `voxspec train multistream` adds them as
    /// training utterances with their phone alignments moved by as much. 1: none.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) phase_shifts: usize,
}

pub fn run(cmd: CodecCommand) -> anyhow::Result<()> {
    match cmd {
        CodecCommand::Train(args) if args.kind == CodecKind::Socodec => {
            anyhow::ensure!(
                !args.decoder_only,
                "--decoder-only is for the SpeechTokenizer-style codec, not --kind socodec"
            );
            crate::socodec_cmd::train(args)
        }
        CodecCommand::Train(args) => train(args),
        CodecCommand::Encode(args) if is_socodec(&args.codec) => crate::socodec_cmd::encode(args),
        CodecCommand::Encode(args) => encode(args),
        CodecCommand::Decode(args) if is_socodec(&args.codec) => crate::socodec_cmd::decode(args),
        CodecCommand::Decode(args) => decode(args),
        CodecCommand::Extract(args) if is_socodec(&args.codec) => crate::socodec_cmd::extract(args),
        CodecCommand::Extract(args) => extract(args),
        CodecCommand::Eval(args) => crate::codec_eval::run(args),
        CodecCommand::PlotStreams(args) => crate::socodec_cmd::plot_streams(args),
    }
}

/// Loads a codec model directory written by `codec train`.
pub(crate) fn load_codec(
    dir: &Path,
    device: &Device,
) -> anyhow::Result<(SpeechTokenizerConfig, SpeechTokenizer)> {
    voxspec_codec::load_codec(dir, device)
        .with_context(|| format!("loading the codec {}", dir.display()))
}

/// Reads an audio file at `rate`, saying so when it had to be resampled.
pub(crate) fn read_audio(path: &Path, rate: u32) -> anyhow::Result<Vec<f32>> {
    let audio = voxspec_audio::load(path)
        .with_context(|| format!("{} is not readable audio", path.display()))?;
    if audio.sample_rate == rate {
        return Ok(audio.samples);
    }
    tracing::info!(
        file = %path.display(),
        from = audio.sample_rate,
        to = rate,
        "resampling to the codec's rate"
    );
    voxspec_audio::resample(&audio.samples, audio.sample_rate, rate)
        .with_context(|| format!("resampling {} to {rate} Hz", path.display()))
}

/// What `--resume` needs besides the checkpoint: the task settings of the run.
#[derive(Debug, Serialize, Deserialize)]
struct RunFile {
    preset: Preset,
    teacher_features: Option<PathBuf>,
    #[serde(default)]
    init: Option<PathBuf>,
    task: CodecTrainConfig,
}

/// Teacher features of `id` from `store`, brought to `frames` codec frames.
fn teacher_for(
    store: &FeatureStoreReader,
    id: &str,
    frames: usize,
    codec_rate: f32,
    device: &Device,
) -> anyhow::Result<(Vec<f32>, usize, usize)> {
    let f = store.get(id)?.with_context(|| {
        format!("no teacher features for utterance {id}; rerun `voxspec teacher extract`")
    })?;
    let same_rate = (store.meta().frame_rate - codec_rate).abs() < 1e-3;
    let dim = f.dim;
    let values = if same_rate {
        // Equal rates: the counts differ by padding only; cut or repeat the last frame.
        let mut v = f.data;
        v.truncate(frames.min(f.frames) * dim);
        while v.len() < frames * dim && f.frames > 0 {
            let last = v[v.len() - dim..].to_vec();
            v.extend_from_slice(&last);
        }
        v
    } else {
        let t: Tensor<3> = Tensor::from_data(TensorData::new(f.data, [1, f.frames, dim]), device);
        resample_frames(t, frames)
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| anyhow::anyhow!("resampling the features of {id}: {e:?}"))?
    };
    Ok((values, frames, dim))
}

/// Audio (and teacher features) of a split, in memory.
fn load_split(
    utterances: &[Utterance],
    config: &SpeechTokenizerConfig,
    features: Option<&FeatureStoreReader>,
    what: &str,
) -> anyhow::Result<Vec<CodecUtterance>> {
    let rate = config.sample_rate;
    let hop = config.hop_length();
    let codec_rate = config.frame_rate();
    let device = crate::device::single()?;
    let bar = Bar::with_len(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let samples = read_audio(Path::new(&u.path), rate)
                .with_context(|| format!("utterance {}", u.id))?;
            let teacher = features
                .map(|store| {
                    teacher_for(
                        store,
                        &u.id,
                        samples.len().div_ceil(hop),
                        codec_rate,
                        &device,
                    )
                })
                .transpose()?;
            bar.inc(1);
            Ok(CodecUtterance { samples, teacher })
        })
        .collect::<anyhow::Result<Vec<_>>>();
    bar.finish();
    out
}

fn train(args: TrainArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        args.segment > 0.0 && args.segment <= 60.0,
        "--segment {} s: a training segment is given in seconds, above 0 and at most 60 \
         (SpeechTokenizer trains on 3 s, the bundled recipes on 1–3 s)",
        args.segment
    );
    let train = read_split(&args.data, "train", true)?;
    anyhow::ensure!(
        !train.is_empty(),
        "{} has no utterances",
        args.data.join("train.jsonl").display()
    );
    let dev = read_split(&args.data, "dev", false)?;
    let start = voxspec_train::open_run::<RunFile>(&args.out, "codec", args.train.resume)?;
    let run = if let voxspec_train::RunStart::Resume(run) = start {
        if run.preset != args.preset {
            tracing::warn!(saved = ?run.preset, given = ?args.preset,
                "--preset ignored: resuming with the run's saved model");
        }
        run
    } else {
        if args.train.resume {
            tracing::warn!(
                "--resume: no checkpoint in {}, starting a new run",
                args.out.display()
            );
        }
        let mut model = match &args.init {
            Some(dir) => voxspec_codec::read_codec_config(dir)
                .with_context(|| format!("reading the starting codec {}", dir.display()))?,
            None => args.preset.config(),
        };
        if let Some(dir) = &args.teacher_features {
            let store = FeatureStoreReader::open(dir, "train")
                .with_context(|| format!("opening the teacher features {}", dir.display()))?;
            anyhow::ensure!(
                args.init.is_none() || model.semantic_dimension == store.meta().dim,
                "--init {} distils to {} dimensions but the teacher features in {} are {}-d",
                args.init.as_deref().unwrap_or(Path::new("")).display(),
                model.semantic_dimension,
                dir.display(),
                store.meta().dim
            );
            model = model.with_semantic_dimension(store.meta().dim);
        }
        let hop = model.hop_length();
        let segment_frames = ((args.segment * f64::from(model.sample_rate)) as usize / hop).max(1);
        let task = CodecTrainConfig::new()
            .with_model(model)
            .with_segment_samples(segment_frames * hop)
            .with_batch_size(args.train.batch)
            .with_data_seed(args.train.seed)
            .with_adversarial(args.adversarial.then(DiscriminatorsConfig::new))
            .with_decoder_only(args.decoder_only);
        let run = RunFile {
            preset: args.preset,
            teacher_features: args.teacher_features.clone(),
            init: args.init.clone(),
            task,
        };
        voxspec_train::save_run_settings(&args.out, "codec", &run)?;
        run
    };
    let model_config = run.task.model.clone();
    let hop = model_config.hop_length();
    let (train_store, dev_store) = match &run.teacher_features {
        Some(dir) => {
            let train = FeatureStoreReader::open(dir, "train")
                .with_context(|| format!("opening the teacher features {}", dir.display()))?;
            anyhow::ensure!(
                train.meta().dim == model_config.semantic_dimension,
                "teacher features in {} are {}-d but the model distils to {} dimensions",
                dir.display(),
                train.meta().dim,
                model_config.semantic_dimension
            );
            let dev = FeatureStoreReader::open(dir, "dev").ok();
            println!(
                "teacher features {}: {}-d at {} Hz ({}), codec frames at {} Hz",
                dir.display(),
                train.meta().dim,
                train.meta().frame_rate,
                train.meta().teacher,
                model_config.frame_rate()
            );
            (Some(train), dev)
        }
        None => {
            println!("no --teacher-features: training without semantic distillation");
            (None, None)
        }
    };
    let train_utts = load_split(&train, &model_config, train_store.as_ref(), "train audio")?;
    let dev_utts = if dev.is_empty() {
        Vec::new()
    } else {
        load_split(&dev, &model_config, dev_store.as_ref(), "dev audio")?
    };
    println!(
        "train: {} utterances, dev: {} utterances; segments of {} samples, batch {}",
        train_utts.len(),
        dev_utts.len(),
        run.task.segment_samples,
        run.task.batch_size
    );
    let seg = run.task.segment_samples;
    let batch = run.task.batch_size;
    let seed = run.task.data_seed;
    let train_data = CodecData::new(train_utts, seg, batch, hop, seed)?;
    let valid_data = if dev_utts.is_empty() {
        None
    } else {
        Some(CodecData::new(dev_utts, seg, batch, hop, seed)?)
    };
    let device = crate::device::single()?;
    let mut task = CodecTrainTask::new(run.task, train_data, valid_data, &device)?;
    if let Some(dir) = &run.init {
        println!("starting from the codec {}", dir.display());
        task = task.with_init(dir.join(voxspec_train::weights::WEIGHTS_FILE));
    }
    let mut config = args.train.config(5.0);
    config.freeze = task.freeze_patterns();
    if !config.freeze.is_empty() {
        println!("training the decoder only: the encoder and the codebooks stay frozen");
    }
    let stop = Arc::new(AtomicBool::new(false));
    install_ctrl_c(stop.clone())?;
    let trainer = Trainer::new(config, task, &args.out, &device).with_stop_flag(stop);
    let started = Instant::now();
    let mut observer = CodecBar(StepBar::new(args.train.steps));
    let outcome = trainer.run(&mut observer)?;
    observer.0.bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let model = outcome.model.generator.valid();
    voxspec_codec::save_codec(&args.out, &model_config, &model)?;
    if outcome.stopped {
        println!(
            "stopped at step {} after {seconds:.0} s; continue with --resume",
            outcome.step
        );
    } else {
        println!("trained {} steps in {seconds:.0} s", outcome.step);
    }
    println!(
        "codec: {} ({} × {} codes at {} Hz)",
        args.out.display(),
        model_config.n_q,
        model_config.codebook_size,
        model_config.frame_rate()
    );
    Ok(())
}

/// The step bar with codec validation lines (losses, no error rate).
pub(crate) struct CodecBar(pub(crate) StepBar);

impl TrainObserver for CodecBar {
    fn on_step(&mut self, report: &voxspec_train::StepReport) {
        self.0.on_step(report);
    }

    fn on_validation(&mut self, step: usize, values: &std::collections::BTreeMap<String, f64>) {
        let parts: Vec<String> = values.iter().map(|(k, v)| format!("{k} {v:.4}")).collect();
        let line = format!("step {step}: dev {}", parts.join(", "));
        if self.0.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.0.bar.println(line);
        }
    }

    fn on_checkpoint(&mut self, step: usize, dir: &Path) {
        self.0.on_checkpoint(step, dir);
    }
}

/// Codes `[n_q, frames]` (stream-major) of one waveform.
fn encode_wave(
    model: &SpeechTokenizer,
    samples: &[f32],
    n_q: usize,
    device: &Device,
) -> anyhow::Result<Codes> {
    anyhow::ensure!(!samples.is_empty(), "the audio is empty");
    let wave: Tensor<3> = Tensor::from_data(
        TensorData::new(samples.to_vec(), [1, 1, samples.len()]),
        device,
    );
    let codes = model.encode(wave, n_q)?; // [n_q, 1, frames]
    let [q, _, frames] = codes.dims();
    let data = codes
        .into_data()
        .try_into_vec_as::<i64>()
        .map_err(|e| anyhow::anyhow!("reading the codes: {e:?}"))?;
    let data = data
        .into_iter()
        .map(|c| u32::try_from(c).map_err(|_| anyhow::anyhow!("negative code {c}")))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    Ok(Codes::new(q, frames, data)?)
}

fn check_n_q(n_q: Option<usize>, model: &SpeechTokenizer) -> anyhow::Result<usize> {
    let all = model.n_q();
    let n = n_q.unwrap_or(all);
    anyhow::ensure!(
        (1..=all).contains(&n),
        "--n-q {n}: the codec has RVQ layers 1..={all}"
    );
    Ok(n)
}

fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let n_q = check_n_q(args.n_q, &model)?;
    let samples = read_audio(&args.input, config.sample_rate)?;
    let codes = encode_wave(&model, &samples, n_q, &device)
        .with_context(|| format!("encoding {}", args.input.display()))?;
    let meta = HashMap::from([
        ("format".to_string(), "voxspec-codes".to_string()),
        ("sample_rate".to_string(), config.sample_rate.to_string()),
        ("frame_rate".to_string(), config.frame_rate().to_string()),
        ("hop".to_string(), config.hop_length().to_string()),
        (
            "codebook_size".to_string(),
            config.codebook_size.to_string(),
        ),
        ("samples".to_string(), samples.len().to_string()),
    ]);
    write_codes(&args.out, &codes, meta)?;
    println!(
        "{}: {} samples at {} Hz → codes [{}, {}] → {}",
        args.input.display(),
        samples.len(),
        config.sample_rate,
        codes.n_q,
        codes.n_frames,
        args.out.display()
    );
    Ok(())
}

/// Writes codes `[n_q, frames]` as a safetensors file (one I64 tensor "codes", `meta` as its
/// metadata, `format=voxspec-codes` added), atomically.
pub(crate) fn write_codes(
    path: &Path,
    codes: &Codes,
    mut meta: HashMap<String, String>,
) -> anyhow::Result<()> {
    let bytes: Vec<u8> = codes
        .data
        .iter()
        .flat_map(|&c| i64::from(c).to_le_bytes())
        .collect();
    let view = safetensors::tensor::TensorView::new(
        safetensors::Dtype::I64,
        vec![codes.n_q, codes.n_frames],
        &bytes,
    )
    .map_err(|e| anyhow::anyhow!("building the codes tensor: {e}"))?;
    meta.insert("format".to_string(), "voxspec-codes".to_string());
    let file = safetensors::serialize([(CODES_TENSOR, view)], Some(meta))
        .map_err(|e| anyhow::anyhow!("serialising the codes: {e}"))?;
    voxspec_data::write_atomic(path, &file)?;
    Ok(())
}

/// Reads a codes file: the codes `[n_q, frames]` (row-major) and the recorded sample count.
pub(crate) fn read_codes(path: &Path) -> anyhow::Result<(usize, usize, Vec<i64>, Option<usize>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a safetensors codes file: {e}", path.display()))?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let samples = header
        .metadata()
        .as_ref()
        .and_then(|m| m.get("samples"))
        .and_then(|s| s.parse().ok());
    let t = st
        .tensor(CODES_TENSOR)
        .map_err(|_| anyhow::anyhow!("{} has no tensor \"{CODES_TENSOR}\"", path.display()))?;
    let shape = t.shape();
    anyhow::ensure!(
        shape.len() == 2,
        "{}: codes must be [n_q, frames], got {shape:?}",
        path.display()
    );
    let data: Vec<i64> = match t.dtype() {
        safetensors::Dtype::I64 => t
            .data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect(),
        safetensors::Dtype::I32 => t
            .data()
            .chunks_exact(4)
            .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        other => bail!(
            "{}: codes must be I64 or I32, got {other:?}",
            path.display()
        ),
    };
    Ok((shape[0], shape[1], data, samples))
}

fn decode(args: DecodeArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let (n_q, frames, data, samples) = read_codes(&args.input)?;
    anyhow::ensure!(
        (1..=model.n_q()).contains(&n_q) && frames > 0,
        "{}: codes [{n_q}, {frames}] do not fit the codec ({} RVQ layers)",
        args.input.display(),
        model.n_q()
    );
    let k = config.codebook_size as i64;
    if let Some(bad) = data.iter().find(|&&c| !(0..k).contains(&c)) {
        bail!(
            "{}: code {bad} is outside the codebook [0, {k})",
            args.input.display()
        );
    }
    let codes: Tensor<3, Int> = Tensor::from_data(TensorData::new(data, [n_q, 1, frames]), &device); // [n_q, batch, frames]
    let wave = model.decode(codes)?; // [1, 1, frames · hop]
    let mut out = wave
        .into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the waveform: {e:?}"))?;
    if let Some(n) = samples {
        out.truncate(n);
    }
    let n = out.len();
    let audio = voxspec_audio::Audio::new(out, config.sample_rate);
    voxspec_audio::write_wav(&args.out, &audio, args.format.into())?;
    println!(
        "{}: codes [{n_q}, {frames}] → {n} samples at {} Hz → {}",
        args.input.display(),
        config.sample_rate,
        args.out.display()
    );
    Ok(())
}

fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.phase_shifts == 1,
        "--phase-shifts is for SoCodec-style codecs (frames longer than their teacher's); {} is \
         a SpeechTokenizer-style codec",
        args.codec.display()
    );
    let device = crate::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let n_q = check_n_q(args.n_q, &model)?;
    let rate = config.sample_rate;
    let hop = config.hop_length();
    let meta = TokenStoreMeta {
        n_q,
        codebook_size: u32::try_from(config.codebook_size)
            .context("the codebook size does not fit 32 bits")?,
        frame_rate: config.frame_rate(),
    };
    println!(
        "codec {}: {n_q} × {} codes at {} Hz (hop {hop} at {rate} Hz)",
        args.codec.display(),
        config.codebook_size,
        meta.frame_rate
    );
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let split = split.as_str();
        let done = stored_ids(&args.out, split, meta)?;
        let mut writer = TokenStoreWriter::new(&args.out, split, meta, args.shard_frames)?;
        let todo: Vec<&Utterance> = utterances
            .iter()
            .filter(|u| !done.contains(&u.id))
            .collect();
        let kept = utterances.len() - todo.len();
        let bar = Bar::with_len(todo.len() as u64, split);
        let mut frames = 0usize;
        for chunk in todo.chunks(args.batch.max(1)) {
            let waves = chunk
                .par_iter()
                .map(|u| {
                    read_audio(Path::new(&u.path), rate)
                        .with_context(|| format!("utterance {}", u.id))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            for (u, wave) in chunk.iter().zip(&waves) {
                let codes = encode_wave(&model, wave, n_q, &device)
                    .with_context(|| format!("encoding utterance {}", u.id))?;
                check_frames(u, wave.len(), codes.n_frames, rate, hop)?;
                frames += codes.n_frames;
                writer.push(&u.id, codes)?;
                bar.inc(1);
            }
        }
        writer.finish()?;
        bar.finish();
        println!(
            "{split}: {} utterances written ({frames} frames), {kept} already there",
            todo.len()
        );
    }
    println!("tokens: {}", args.out.display());
    Ok(())
}

/// Ids already in the token store of `split` under `out` (none when there is no store), which
/// must hold codes of `meta`'s kind.
pub(crate) fn stored_ids(
    out: &Path,
    split: &str,
    meta: TokenStoreMeta,
) -> anyhow::Result<std::collections::HashSet<String>> {
    match voxspec_data::TokenStore::open(out, split) {
        Ok(store) => {
            anyhow::ensure!(
                store.meta() == meta,
                "{}: the {split} store holds {:?}, this codec writes {:?}; use another --out",
                out.display(),
                store.meta(),
                meta
            );
            Ok(store.ids().into_iter().map(String::from).collect())
        }
        Err(_) => Ok(Default::default()),
    }
}

/// The codec's frame rule: `ceil(samples / hop)` frames, and the manifest duration must give
/// the same count within one frame (duration rounding).
fn check_frames(
    u: &Utterance,
    samples: usize,
    frames: usize,
    rate: u32,
    hop: usize,
) -> anyhow::Result<()> {
    let expected = samples.div_ceil(hop);
    anyhow::ensure!(
        frames == expected,
        "utterance {}: the codec produced {frames} frames for {samples} samples; expected \
         ceil({samples} / {hop}) = {expected}",
        u.id
    );
    let from_duration = (u.duration * f64::from(rate) / hop as f64).ceil() as usize;
    anyhow::ensure!(
        frames.abs_diff(from_duration) <= 1,
        "utterance {}: {frames} frames ({samples} samples) do not match the manifest duration \
         {:.3} s ({from_duration} frames at {} Hz); the manifest is stale or the file changed: \
         rerun `voxspec prepare`",
        u.id,
        u.duration,
        rate as f32 / hop as f32
    );
    Ok(())
}
