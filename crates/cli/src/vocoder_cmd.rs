//! `voxspec vocoder train | synth | eval`: the Vocos-style vocoder (log-mel → waveform) through
//! the one training loop, analysis–resynthesis of audio files, and resynthesis quality against
//! Griffin-Lim (`eval`, in `vocoder_eval.rs`).
//!
//! A vocoder model directory holds `config.json` (`"kind": "vocoder"`, the `VocosConfig` under
//! `model`) and `model.safetensors`, loaded strictly.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use burn::module::Module;
use clap::{Args, Subcommand, ValueEnum};
use voxspec_codec::vocoder::{
    DiscriminatorSize, VocoderRunSettings, VocoderTask, VocosConfig, save_vocoder,
};
use voxspec_data::load_waves;
use voxspec_train::Trainer;

use crate::common::{load_vocoder, read_audio};
use crate::progress::Bar;
use crate::train_loop::{self, DevLines, LoopArgs};

/// The vocoder subcommands (each one's help comes from its arguments' documentation).
#[derive(Debug, Subcommand)]
pub enum VocoderCommand {
    Train(TrainArgs),
    Synth(SynthArgs),
    Eval(crate::vocoder_eval::EvalArgs),
}

/// Train a Vocos-style vocoder (log-mel → waveform) on a prepared corpus.
///
/// A ConvNeXt backbone at the mel frame rate predicts a complex STFT that an inverse STFT turns
/// into samples; trained on the multi-resolution STFT loss (spectral convergence + log magnitude
/// at 3 resolutions) plus 45 × the mel L1 loss, and with --adversarial also against HiFi-GAN's
/// multi-period and multi-scale discriminators (LSGAN + feature matching; each step then
/// updates the vocoder and the discriminators in turn, about 3× the time of a plain step).
/// The input is the log-mel of each training segment, computed with the model's own mel
/// settings. --init starts from a trained vocoder (e.g. a plain run, then adversarial
/// fine-tuning).
///
/// Reads <DATA>/train.jsonl (and dev.jsonl for validation losses); audio is resampled to the
/// vocoder's rate and cut into non-overlapping segments of --segment seconds. Writes into
/// <OUT>: run.json at the start; metrics.jsonl and TensorBoard events while training;
/// checkpoint-NNNNNN/ every --checkpoint-every steps; at the end (or on Ctrl-C) the vocoder
/// model directory: config.json ("kind": "vocoder") + model.safetensors, which
/// `vocoder synth|eval --vocoder <OUT>` load.
///
/// Ctrl-C finishes the current step, writes a checkpoint and the model, and exits 0 (a second
/// Ctrl-C exits at once). `--resume` continues from the newest checkpoint with the saved task
/// settings; a run directory with checkpoints is not reused without it.
#[derive(Debug, Args)]
#[command(mut_arg("batch", |a| a.default_value("8")))]
#[command(mut_arg("lr", |a| a.default_value("0.0005")))]
pub struct TrainArgs {
    /// Prepared data directory (train.jsonl, optional dev.jsonl).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Run directory (also the vocoder model directory at the end).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Model size: tiny (n_fft 256, hop 64, 20 mels, width 32, 2 blocks); small (16 kHz,
    /// n_fft 640, hop 160: 100 frames/s, the mel decoder's and SoCodec's mel rate; 80 mels,
    /// width 192, 4 blocks, about 1.2 M parameters); base (Vocos' published 24 kHz size).
    #[arg(long, value_enum, default_value = "small")]
    preset: voxspec_nn::Preset,
    /// Seconds per training segment (rounded down to whole mel frames).
    #[arg(long, default_value_t = 1.0)]
    segment: f64,
    /// Train against multi-period and multi-scale discriminators as well.
    #[arg(long)]
    adversarial: bool,
    /// Width of the discriminators: `small` (a quarter of HiFi-GAN's channels, about a
    /// sixteenth of its work: what two CPU cores train in minutes) or `full` (HiFi-GAN's).
    #[arg(long, value_enum, default_value = "small")]
    discriminators: DiscriminatorArg,
    /// Weight of APNet's anti-wrapping phase losses against the recording's phase (its
    /// instantaneous phase, group delay and instantaneous frequency at the vocoder's STFT),
    /// which teach the head phases that join from frame to frame without discriminators; 0:
    /// none.
    #[arg(long, default_value_t = 0.0, value_name = "W")]
    phase_weight: f32,
    /// Start from this trained vocoder (its model settings replace --preset's).
    #[arg(long, value_name = "DIR")]
    init: Option<PathBuf>,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

/// `vocoder train --discriminators` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiscriminatorArg {
    /// Period discriminators of base width 8, scale discriminators of 32.
    Small,
    /// HiFi-GAN's widths: 32 and 128.
    Full,
}

impl From<DiscriminatorArg> for DiscriminatorSize {
    fn from(size: DiscriminatorArg) -> Self {
        match size {
            DiscriminatorArg::Small => DiscriminatorSize::Small,
            DiscriminatorArg::Full => DiscriminatorSize::Full,
        }
    }
}

/// Resynthesise audio files with a trained vocoder (or Griffin-Lim).
///
/// Each input is read (any format voxspec-audio decodes), downmixed and resampled to the
/// vocoder's rate; its log-mel with the vocoder's mel settings goes through the vocoder
/// (--griffin-lim: through 32 iterations of fast Griffin-Lim on the pseudo-inverted mel
/// instead) and the result, trimmed to the input length, is written as <OUT>/<STEM>.wav.
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Vocoder model directory (`voxspec vocoder train` output); with --griffin-lim only its
    /// mel settings are used.
    #[arg(long, value_name = "DIR")]
    vocoder: PathBuf,
    /// Use Griffin-Lim instead of the neural vocoder.
    #[arg(long)]
    griffin_lim: bool,
    /// Input audio files.
    #[arg(required = true, value_name = "IN")]
    inputs: Vec<PathBuf>,
    /// Output directory (<STEM>.wav per input).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Sample format: 16-bit PCM (every WAV reader opens it) or 32-bit float.
    #[arg(long, value_enum, default_value = "pcm16")]
    format: crate::audio_cmd::FormatArg,
}

pub fn run(cmd: VocoderCommand) -> anyhow::Result<()> {
    match cmd {
        VocoderCommand::Train(args) => train(args),
        VocoderCommand::Synth(args) => synth(args),
        VocoderCommand::Eval(args) => crate::vocoder_eval::run(args),
    }
}

fn train(args: TrainArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        args.segment.is_finite() && args.segment > 0.0,
        "--segment must be positive"
    );
    let (train, dev) = crate::common::train_and_dev(&args.data)?;
    let run = voxspec_train::resume_or_start(&args.out, "vocoder", args.train.resume, || {
        let model = match &args.init {
            Some(dir) => load_vocoder(dir)?.config().clone(),
            None => VocosConfig::preset(args.preset),
        };
        let mut settings = VocoderRunSettings::new(
            args.preset,
            model,
            args.segment,
            args.adversarial.then_some(args.discriminators.into()),
            args.train.batch,
            args.train.seed,
        )?;
        anyhow::ensure!(
            args.phase_weight.is_finite() && args.phase_weight >= 0.0,
            "--phase-weight must be a finite weight of at least 0, not {}",
            args.phase_weight
        );
        settings.loss.phase_weight = args.phase_weight;
        anyhow::Ok(settings)
    })?;
    if run.resumed && run.settings.preset != args.preset {
        tracing::warn!(saved = ?run.settings.preset, given = ?args.preset,
            "--preset ignored: resuming with the run's saved model");
    }
    let run = run.settings;
    let config = run.model.clone();
    let rate = config.sample_rate;
    let train_waves = load_waves(&train, rate, "train audio", &Bar::new())?;
    let segments = run
        .segments(&train_waves)
        .with_context(|| format!("cutting {} into segments", args.data.display()))?;
    let n_segments = segments.len();
    let mut task = VocoderTask::new(config.clone(), run.loss.clone(), segments);
    if let (Some(dir), false) = (&args.init, args.train.resume) {
        task = task.with_init(dir.join(voxspec_train::weights::WEIGHTS_FILE));
    }
    let mut dev_segments = 0;
    if !dev.is_empty() {
        let dev_waves = load_waves(&dev, rate, "dev audio", &Bar::new())?;
        let valid = run.segments(&dev_waves)?;
        dev_segments = valid.len();
        task = task.with_valid(valid);
    }
    println!(
        "train: {} utterances → {} segments of {} frames ({} samples at {rate} Hz), dev: {} \
         segments; batch {}",
        train.len(),
        n_segments,
        run.segment_frames,
        run.segment_frames * config.hop_length,
        dev_segments,
        run.batch_size
    );
    let device = voxspec_train::device::single()?;
    let loop_config = args.train.config(5.0);
    let trainer = Trainer::new(loop_config, task, &args.out, &device);
    let finished = train_loop::run(trainer, args.train.steps, DevLines::Loss)?;
    save_vocoder(
        &args.out,
        &config,
        &finished.outcome.model.valid().generator,
    )?;
    println!(
        "vocoder: {} ({} mels at {} frames/s, {rate} Hz)",
        args.out.display(),
        config.n_mels,
        rate as f32 / config.hop_length as f32
    );
    Ok(())
}

fn synth(args: SynthArgs) -> anyhow::Result<()> {
    let vocoder = load_vocoder(&args.vocoder)?;
    let rate = vocoder.config().sample_rate;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let method = if args.griffin_lim {
        "Griffin-Lim"
    } else {
        "vocoder"
    };
    for input in &args.inputs {
        let samples = read_audio(input, rate)?;
        anyhow::ensure!(!samples.is_empty(), "{} holds no samples", input.display());
        let started = Instant::now();
        let wave =
            voxspec_eval::vocoder::resynthesize(&vocoder, args.griffin_lim.then_some(32), &samples)
                .with_context(|| format!("resynthesising {}", input.display()))?;
        let seconds = started.elapsed().as_secs_f64();
        let stem = input
            .file_stem()
            .with_context(|| format!("{} has no file name", input.display()))?;
        let out = args.out.join(stem).with_extension("wav");
        let audio = voxspec_audio::Audio::new(wave, rate);
        voxspec_audio::write_wav(&out, &audio, args.format.into())?;
        println!(
            "{} → {} ({method}, {:.2} s of audio at {rate} Hz in {seconds:.2} s)",
            input.display(),
            out.display(),
            audio.duration_secs()
        );
    }
    Ok(())
}
