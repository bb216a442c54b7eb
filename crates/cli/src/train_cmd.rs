//! `voxspec train <model>`: training runs through the one training loop. `ctc` trains the
//! supervised CTC teacher; the language models add their own subcommands here.

use std::path::PathBuf;

use anyhow::Context;
use burn::module::Module;
use clap::{Args, Subcommand};
use voxspec_data::Utterance;
use voxspec_eval::ctc_dev::{CtcDevScore, utterance_lines};
use voxspec_nn::Preset;
use voxspec_teacher::LayerSelection;
use voxspec_teacher::ctc::run::{CtcRunFile, CtcRunOptions};
use voxspec_teacher::ctc::{CtcTask, CtcTeacher, ErrorCounts};
use voxspec_train::Trainer;

use crate::progress::Bar;
use crate::train_loop::{self, DevLines, LoopArgs};

#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// Train the supervised CTC teacher (log-mel → characters) on prepared manifests.
    Ctc(CtcArgs),
    /// Train the AR model with multi-token-prediction heads on (text, codes) pairs.
    Mtp(crate::train_lm::MtpArgs),
    /// Train the NAR model that fills RVQ layers 2..N.
    Nar(crate::train_lm::NarArgs),
    /// Fine-tune a draft model cut from a trained AR model's layers.
    Draft(crate::train_lm::DraftArgs),
    /// Train the delayed multi-stream LM on a SoCodec-style codec's tokens.
    Multistream(crate::train_multistream::MultiStreamArgs),
}

/// Train the CTC teacher: conv subsampling + bidirectional transformer over 80-band log-mel
/// (100 Hz in, 50 Hz out), CTC over the characters of the training transcripts.
///
/// Reads <DATA>/train.jsonl and <DATA>/dev.jsonl (from `voxspec prepare`). Writes into <OUT>:
/// tokenizer.json (the character vocabulary) and run.json (the run settings) at the start; metrics.jsonl and
/// TensorBoard events (`tensorboard --logdir <OUT>`) while training; checkpoint-NNNNNN/ every
/// --checkpoint-every steps; at the end (or on Ctrl-C) the model as model.safetensors +
/// config.json + tokenizer.json (loadable by `voxspec teacher`) and eval.json with the dev
/// character error rate, which is also printed.
///
/// Ctrl-C finishes the current step, writes a checkpoint and the model, and exits 0 (a second
/// Ctrl-C exits at once). `--resume` continues from the newest checkpoint with the saved task
/// settings; a run directory with checkpoints is not reused without it. The small preset reached
/// 39% dev CER on the bundled corpus after 1000 steps (≈ 19 min on 2 busy cores).
#[derive(Debug, Args)]
#[command(mut_arg("lr", |a| a.default_value("2e-3")))]
#[command(mut_arg("warmup", |a| a.default_value("200")))]
pub struct CtcArgs {
    /// Prepared data directory (train.jsonl, dev.jsonl).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Run directory.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// At most this many padded 100 Hz feature frames per batch (items × longest).
    #[arg(long, default_value_t = 24000)]
    max_frames: usize,
    /// Model size: tiny (width 32, 2 layers: tests and smoke runs); small (width 144, 4 layers,
    /// ≈ 1.2 M parameters: 2 CPU cores and the bundled corpus); base (width 384, 12 layers,
    /// ≈ 21 M: LibriTTS).
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// Hidden state saved as the default feature layer (default: the last layer).
    #[arg(long, value_name = "L")]
    feature_layer: Option<usize>,
    /// Turn SpecAugment off.
    #[arg(long)]
    no_spec_augment: bool,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

pub fn run(cmd: TrainCommand) -> anyhow::Result<()> {
    match cmd {
        TrainCommand::Ctc(args) => ctc(args),
        TrainCommand::Mtp(args) => crate::train_lm::mtp(args),
        TrainCommand::Nar(args) => crate::train_lm::nar(args),
        TrainCommand::Draft(args) => crate::train_lm::draft(args),
        TrainCommand::Multistream(args) => crate::train_multistream::multistream(args),
    }
}

fn ctc(args: CtcArgs) -> anyhow::Result<()> {
    let (train, dev) = crate::common::train_and_dev(&args.data)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let options = CtcRunOptions {
        preset: args.preset,
        batch_size: args.train.batch,
        max_batch_frames: args.max_frames,
        seed: args.train.seed,
        spec_augment: !args.no_spec_augment,
    };
    let mut trained = None;
    let run = voxspec_train::resume_or_start(&args.out, "ctc", args.train.resume, || {
        let (file, tokenizer) = CtcRunFile::new(&args.out, &train, &options)?;
        trained = Some(tokenizer);
        anyhow::Ok(file)
    })?;
    if run.resumed && run.settings.preset != args.preset {
        tracing::warn!(
            saved = ?run.settings.preset,
            given = ?args.preset,
            "--preset ignored: resuming with the run's saved model"
        );
    }
    let run = run.settings;
    let tokenizer = match trained {
        Some(tokenizer) => tokenizer,
        None => CtcRunFile::tokenizer(&args.out)?,
    };
    let model_config = run.task.model.clone();
    let frontend = run.task.frontend.clone();
    let n_layers = model_config.encoder.n_layers;
    let feature_layer = args.feature_layer.unwrap_or(n_layers);
    anyhow::ensure!(
        feature_layer <= n_layers,
        "--feature-layer {feature_layer}: the model has hidden states 0..={n_layers}"
    );

    let (task, reports) = CtcTask::new(
        run.task,
        tokenizer.clone(),
        &train,
        (!dev.is_empty()).then_some(dev.as_slice()),
        &Bar::new(),
    )?;
    for (split, report) in ["train", "dev"].iter().zip(&reports) {
        println!(
            "{split}: {} utterances{}{}",
            report.kept,
            if report.too_short.is_empty() {
                String::new()
            } else {
                format!(
                    ", {} left out (transcript too long for the audio)",
                    report.too_short.len()
                )
            },
            if report.cached {
                ", features cached"
            } else {
                ""
            }
        );
    }

    let config = args.train.config(5.0);
    let devices = voxspec_train::device::training();
    let trainer = Trainer::new(config, task, &args.out, &devices[0]).with_devices(&devices);
    let finished = train_loop::run(trainer, args.train.steps, DevLines::Loss)?;
    let voxspec_train::Finished { outcome, seconds } = finished;

    let model = outcome.model.valid();
    let teacher = CtcTeacher::new(
        model_config,
        model,
        frontend,
        tokenizer,
        LayerSelection::Index(feature_layer),
    )?;
    teacher.save(&args.out)?;
    println!("model: {}", args.out.join("model.safetensors").display());
    if dev.is_empty() {
        println!("no dev split: no CER computed");
        return Ok(());
    }
    let eval = CtcDevScore::score(&teacher, &dev, outcome.step, seconds, &Bar::new())?;
    voxspec_eval::write_report(&args.out.join("eval.json"), &eval)?;
    let counts = &eval.counts;
    println!(
        "dev CER: {:.2}% ({} edits / {} characters, {} utterances)",
        100.0 * eval.cer,
        counts.edits(),
        counts.reference_len,
        dev.len()
    );
    Ok(())
}

/// Transcribes every utterance of `utterances` with `teacher` (batches of `batch`, a progress
/// bar), returns the summed error counts and, when `per_utterance` is given, one JSON line per
/// utterance.
pub fn score_manifest(
    teacher: &CtcTeacher,
    utterances: &[Utterance],
    batch: usize,
    per_utterance: Option<&mut Vec<serde_json::Value>>,
) -> anyhow::Result<ErrorCounts> {
    let (total, scored) = teacher.score_utterances(utterances, batch, &Bar::new())?;
    if let Some(lines) = per_utterance {
        lines.extend(utterance_lines(scored));
    }
    Ok(total)
}
