//! `voxspec train mtp | nar | draft`: the language models, trained on (text, codec codes)
//! pairs through the one training loop.
//!
//! Every run directory ends with a model directory (`config.json` + `model.safetensors`, see
//! `voxspec_mtp::checkpoint`) and the `tokenizer.json` the model reads text with, so
//! `voxspec synthesize`, `bench` and `export` need nothing else. `run.json` keeps the run's
//! settings for `--resume`.

use std::path::PathBuf;

use anyhow::Context;
use burn::module::Module;
use burn::tensor::Device;
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde::de::DeserializeOwned;
use voxspec_data::{BucketConfig, TrainingPairs};
use voxspec_draft::{DistillConfig, DraftRun, DraftSettings, DraftSpec, check_target};
use voxspec_mtp::{
    MtpConfig, MtpFile, MtpRunOptions, MtpSettings, NarSettings, choose_alignment, load_mtp,
    save_mtp, save_nar,
};
use voxspec_nn::Preset;
use voxspec_train::{TrainConfig, TrainTask, Trainer};

use crate::train_loop::{self, DevLines, LoopArgs};

/// Data and loop settings shared by the three models.
#[derive(Debug, Args)]
pub struct LmCommon {
    /// Prepared data directory (train.jsonl, dev.jsonl from `voxspec prepare`).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Token store directory (`voxspec codec extract`), with train-*.safetensors shards.
    #[arg(long, value_name = "DIR")]
    pub(crate) tokens: PathBuf,
    /// Text tokenizer (default: <DATA>/tokenizer.json).
    #[arg(long, value_name = "FILE")]
    pub(crate) tokenizer: Option<PathBuf>,
    /// Run directory.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// At most this many padded positions (items × longest sequence) per batch.
    #[arg(long, default_value_t = 8192)]
    pub(crate) max_tokens: usize,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

/// Train the AR model with multi-token-prediction heads on (text, stream-0 codes) pairs: head
/// i predicts the code i + 1 steps ahead, the loss is the sum of the heads' cross-entropies
/// (Nguyen et al. 2025, eq. 3). Writes the model directory and tokenizer.json into --out; any
/// k ≤ --heads heads can then be used by the decoders without retraining.
#[derive(Debug, Args)]
pub struct MtpArgs {
    #[command(flatten)]
    common: LmCommon,
    /// Model size: tiny (width 32, 2 layers: tests and smoke runs), small (width 256, 4
    /// layers: the bundled corpora on 2 CPU cores), base (width 1024, 12 layers: the paper's).
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// Prediction heads (1 = a plain AR model).
    #[arg(long, default_value_t = 8)]
    heads: usize,
    /// Loss weight of each head, comma-separated (default: all 1).
    #[arg(long, value_delimiter = ',')]
    head_weights: Vec<f32>,
    /// Aligned model: the text is phones with forced-alignment durations, every code step sees
    /// the phones of the frames ahead, and a duration predictor is trained alongside (needs a
    /// phoneme tokenizer and a manifest with alignments, `voxspec prepare` with TextGrids).
    /// auto: aligned when every training utterance has durations.
    #[arg(long, value_enum, default_value = "auto")]
    alignment: AlignmentMode,
    /// Share of the input codes replaced by random ones in training (targets unchanged), so
    /// that the model leans on the text rather than on its own last codes, which greedy
    /// decoding otherwise repeats (0: none).
    #[arg(long, default_value_t = 0.2, value_name = "P")]
    code_noise: f32,
}

/// Whether the AR model is trained aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AlignmentMode {
    /// Aligned when every training utterance has durations.
    Auto,
    /// Aligned; an error when some training utterance has no durations.
    On,
    /// Plain VALL-E style model (the alignment is left to attention).
    Off,
}

impl From<AlignmentMode> for voxspec_mtp::AlignmentMode {
    fn from(mode: AlignmentMode) -> Self {
        match mode {
            AlignmentMode::Auto => Self::Auto,
            AlignmentMode::On => Self::On,
            AlignmentMode::Off => Self::Off,
        }
    }
}

/// Train the NAR model that fills RVQ layers 2..N of the target frames from the text, the
/// acoustic prompt and the layers below (VALL-E's NAR stage).
#[derive(Debug, Args)]
pub struct NarArgs {
    #[command(flatten)]
    common: LmCommon,
    /// Model size: tiny (width 32, 2 layers: tests and smoke runs), small (width 256, 4
    /// layers: the bundled corpora on 2 CPU cores), base (width 1024, 12 layers: the paper's).
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// RVQ layers modelled (default: all in the token store).
    #[arg(long)]
    n_q: Option<usize>,
    /// Aligned model: the text is phones with forced-alignment durations and every frame sees
    /// the phone it speaks (synthesis then takes the aligned AR model's durations).
    /// auto: aligned when nearly every training utterance has durations.
    #[arg(long, value_enum, default_value = "auto")]
    alignment: AlignmentMode,
}

/// Fine-tune a draft for speculative decoding from a trained AR model: keep --layers of its
/// layers (negative indices count from the end), freeze the embedding, the final norm and the
/// upper layers, train the lower layers (those given with non-negative indices) and the
/// next-token head with cross-entropy, plus optionally a KL term to the frozen target.
#[derive(Debug, Args)]
pub struct DraftArgs {
    #[command(flatten)]
    common: LmCommon,
    /// The target: a run directory of `voxspec train mtp`.
    #[arg(long, value_name = "DIR")]
    target: PathBuf,
    /// Target layers the draft keeps, e.g. 0,1,-2,-1.
    #[arg(long, default_value = "0,1,-2,-1", allow_hyphen_values = true)]
    layers: String,
    /// Weight of the KL term to the target's next-token distribution (0: cross-entropy only).
    #[arg(long, default_value_t = 0.0)]
    distill_weight: f32,
    /// Temperature of the distillation term.
    #[arg(long, default_value_t = 1.0)]
    distill_temperature: f32,
}

/// Loaded pairs of the train and dev splits, and the tokenizer.
pub(crate) type Pairs = TrainingPairs;

/// The pairs of `--data` and `--tokens`, each split's count printed.
pub(crate) fn load_pairs(common: &LmCommon) -> anyhow::Result<Pairs> {
    let mut report = |split: &str, n: usize| println!("{split}: {n} utterances with codes");
    Ok(TrainingPairs::load(
        &common.data,
        &common.tokens,
        common.tokenizer.as_deref(),
        &mut report,
    )?)
}

/// The settings of the run in `--out`: those saved by the run when resuming (`--resume`, with
/// checkpoints there), else `settings`, saved for a later resume.
pub(crate) fn run_settings<T: Serialize + DeserializeOwned>(
    common: &LmCommon,
    kind: &str,
    settings: T,
) -> anyhow::Result<T> {
    let run = voxspec_train::resume_or_start(&common.out, kind, common.train.resume, || {
        anyhow::Ok(settings)
    })?;
    Ok(run.settings)
}

pub(crate) fn bucket(common: &LmCommon, shuffle: bool) -> BucketConfig {
    BucketConfig {
        max_items: common.train.batch,
        max_padded_len: common.max_tokens,
        shuffle,
        seed: common.train.seed,
    }
}

fn train_config(common: &LmCommon, freeze: Vec<String>) -> TrainConfig {
    TrainConfig {
        freeze,
        ..common.train.config(1.0)
    }
}

/// Runs the loop on `devices` (data-parallel when there are several) with a progress bar and
/// Ctrl-C handling; returns the trained model (plain device) and whether the run finished.
pub(crate) fn train<T: TrainTask>(
    common: &LmCommon,
    task: T,
    freeze: Vec<String>,
    devices: &[Device],
) -> anyhow::Result<(T::Model, bool)> {
    if devices.len() > 1 {
        println!(
            "data-parallel on {}: {} batches per step",
            voxspec_train::device::describe(),
            devices.len()
        );
    }
    let trainer = Trainer::new(train_config(common, freeze), task, &common.out, &devices[0])
        .with_devices(devices);
    let outcome = train_loop::run(trainer, common.train.steps, DevLines::Loss)?.outcome;
    Ok((outcome.model.valid(), !outcome.stopped))
}

/// The AR model of `preset`'s size.
pub(crate) fn mtp_config(preset: Preset, text_vocab: usize, codebook: usize) -> MtpConfig {
    MtpConfig::preset(preset, text_vocab, codebook)
}

pub fn mtp(args: MtpArgs) -> anyhow::Result<()> {
    let options = MtpRunOptions {
        size: args.preset,
        heads: args.heads,
        head_weights: args.head_weights,
        code_noise: args.code_noise,
    };
    options.validate()?;
    let common = &args.common;
    let mut pairs = load_pairs(common)?;
    let aligned = decide_alignment(
        args.alignment,
        &mut pairs,
        "AR model",
        "aligned (phone track + duration predictor)",
    )?;
    let settings = MtpSettings::new(&options, &pairs, aligned, bucket(common, true))?;
    let settings = run_settings(common, "mtp", settings)?;
    let task = settings.task(&pairs);
    let (model, _) = train(common, task, Vec::new(), &voxspec_train::device::training())?;
    let file = MtpFile {
        model: settings.model,
        draft: None,
    };
    save_mtp(&common.out, &file, &model)?;
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!("model: {}", common.out.join("model.safetensors").display());
    Ok(())
}

/// Whether a model trains aligned under `mode`; an aligned model keeps only the utterances
/// with durations (printed).
fn decide_alignment(
    mode: AlignmentMode,
    pairs: &mut Pairs,
    what: &str,
    aligned_means: &str,
) -> anyhow::Result<bool> {
    let choice = choose_alignment(mode.into(), pairs)?;
    println!(
        "{what}: {} ({} of {} training utterances have durations)",
        if choice.aligned {
            aligned_means
        } else {
            "plain (alignment left to attention)"
        },
        choice.with_durations,
        choice.train
    );
    if choice.left_out() > 0 {
        println!(
            "leaving out {} training utterances without durations",
            choice.left_out()
        );
    }
    Ok(choice.aligned)
}

pub fn nar(args: NarArgs) -> anyhow::Result<()> {
    let common = &args.common;
    let mut pairs = load_pairs(common)?;
    let aligned = decide_alignment(
        args.alignment,
        &mut pairs,
        "NAR model",
        "aligned (every frame sees its phone)",
    )?;
    let settings = NarSettings::new(args.preset, args.n_q, &pairs, aligned, bucket(common, true))?;
    let settings = run_settings(common, "nar", settings)?;
    let task = settings.task(&pairs)?;
    let (model, _) = train(common, task, Vec::new(), &voxspec_train::device::training())?;
    save_nar(&common.out, &settings.model, &model)?;
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!("model: {}", common.out.join("model.safetensors").display());
    Ok(())
}

pub fn draft(args: DraftArgs) -> anyhow::Result<()> {
    let common = &args.common;
    let pairs = load_pairs(common)?;
    // The task holds the frozen target on this device: drafts train on one device.
    let train_device = voxspec_train::device::single()?.autodiff();
    let (target_file, target) = load_mtp(&args.target, &train_device)
        .with_context(|| format!("loading the target {}", args.target.display()))?;
    check_target(
        &args.target,
        &target_file,
        &target,
        pairs.tokenizer.vocab_size(),
        pairs.codebook,
    )?;
    let distill = DistillConfig::checked(args.distill_weight, args.distill_temperature)?;
    let spec = DraftSpec::parse(&args.layers)?;
    let layers = spec.resolve(target.transformer.n_layers())?;
    let settings = run_settings(
        common,
        "draft",
        DraftSettings {
            target: args.target.clone(),
            spec,
            distill,
            bucket: bucket(common, true),
        },
    )?;
    let freeze = settings.spec.freeze_patterns()?;
    let DraftRun {
        task,
        config: draft_config,
        target_info,
    } = settings.run(
        &args.target,
        target.no_grad(),
        &target_file.model,
        &layers,
        &pairs,
    );
    let (model, _) = train(common, task, freeze, std::slice::from_ref(&train_device))?;
    let file = MtpFile {
        model: draft_config,
        draft: Some(target_info),
    };
    save_mtp(&common.out, &file, &model)?;
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!(
        "draft ({} of {} target layers): {}",
        layers.len(),
        target_file.model.transformer.n_layers,
        common.out.join("model.safetensors").display()
    );
    Ok(())
}
