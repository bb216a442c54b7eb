//! `voxspec train multistream`: the delayed multi-stream LM on the tokens of a SoCodec-style
//! codec (`voxspec codec extract` with a `--kind socodec` codec), through the one training loop.
//!
//! Every utterance is conditioned on a voice vector (the mean of the codec's global embeddings
//! of its speaker's other recordings: at inference the reference is never the target) and, for
//! an aligned model, on the phones of the coming frames (durations from the manifest's forced
//! alignments in 20 ms units). The run directory ends with the model directory (`config.json` kind `multistream` +
//! `model.safetensors`, and with `--mtp-heads` one `transitions-<j>.safetensors` per stream)
//! and `tokenizer.json`.

use std::path::{Path, PathBuf};

use clap::Args;
use voxspec_data::TrainingPairs;
use voxspec_draft::DraftSpec;
use voxspec_multistream::{
    DraftRun, DraftSettings, FrozenLm, HeadsRun, HeadsSettings, MsItem, MsModelOptions,
    MsMtpConfig, MultiStreamConfig, MultiStreamSettings, MultiStreamTaskConfig, add_phase_shifts,
    duration_units, pair_voices, save_run,
};

use crate::progress::Bar;
use voxspec_nn::Preset;

use crate::train_lm::{AlignmentMode, LmCommon};

/// Train the delayed multi-stream LM (SoCodec §4): text (phones) and the K streams of a
/// multi-stream codec's tokens in one sequence, stream j delayed by d·j steps, one head per
/// stream, voiced by the codec's global embedding of each utterance. Writes the model directory
/// and tokenizer.json into --out.
#[derive(Debug, Args)]
pub struct MultiStreamArgs {
    #[command(flatten)]
    common: LmCommon,
    /// The SoCodec-style codec that made the tokens: its global encoder gives every utterance
    /// its voice vector, and synthesis decodes with it.
    #[arg(long, value_name = "DIR")]
    codec: PathBuf,
    /// Model size: tiny (width 32, 2 layers: tests and smoke runs), small (width 256, 4
    /// layers: the bundled corpora on 2 CPU cores), base (width 1024, 12 layers: the paper's).
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// Streams modelled (the first K of the token store; default all).
    #[arg(long)]
    streams: Option<usize>,
    /// Delay step d: stream j is delayed by d·j steps (0: no delay, the paper's ablation).
    #[arg(long, default_value_t = 1)]
    delay: usize,
    /// Aligned model: every speech step sees the phones of the frames ahead and a duration
    /// predictor is trained alongside (needs a phoneme tokenizer and alignments in the
    /// manifest). auto: aligned when at least 90 % of the training utterances have them.
    #[arg(long, value_enum, default_value = "auto")]
    alignment: AlignmentMode,
    /// Dropout of the transformer (default: the preset's). The bundled corpus overfits fast:
    /// its recipe trains with 0.3.
    #[arg(long)]
    dropout: Option<f64>,
    /// Probability of replacing each input code by the special token in training (the
    /// targets keep them): leans the model on the text and step track instead of memorised
    /// code sequences.
    #[arg(long, default_value_t = 0.0)]
    code_dropout: f32,
    /// Prediction heads per step: 1 is the plain LM; n > 1 adds multi-token heads predicting
    /// the steps 2..n ahead (decoded with `synthesize --decoder mtp|mtp-viterbi --heads`),
    /// and writes one transition matrix per stream for Viterbi.
    #[arg(long, default_value_t = 1)]
    mtp_heads: usize,
    /// Loss weight decay of the extra heads: head i counts weight^i.
    #[arg(long, default_value_t = 0.8)]
    mtp_weight: f32,
    /// Add the --mtp-heads to this trained multi-stream LM (its run directory) instead of
    /// training a new one: its weights stay frozen and only the new heads train (Medusa-1),
    /// so its own next-step predictions are unchanged.
    #[arg(long, value_name = "DIR", conflicts_with = "target")]
    base: Option<PathBuf>,
    /// Train a draft for speculative decoding instead: cut from this trained multi-stream LM
    /// (its run directory), keeping --layers; the lower layers (non-negative indices) and the
    /// heads train, the rest stays frozen. The model settings above come from the target.
    #[arg(long, value_name = "DIR")]
    target: Option<PathBuf>,
    /// Target layers the draft keeps (with --target), e.g. 0 or 0,-1.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    layers: String,
    /// Leave out the phase-shifted encodings of the training utterances that the token store
    /// holds (`voxspec codec extract --phase-shifts N`); by default they train too.
    #[arg(long)]
    no_phase_shifts: bool,
}

pub fn multistream(args: MultiStreamArgs) -> anyhow::Result<()> {
    let common = &args.common;
    let mut pairs = crate::train_lm::load_pairs(common)?;
    let mut manifest = voxspec_data::read_split_if_present(&common.data, "train")?;
    let shifted = if args.no_phase_shifts {
        Vec::new()
    } else {
        let shifts = add_phase_shifts(&common.tokens, &manifest, &mut pairs)?;
        if !shifts.utterances.is_empty() {
            println!(
                "phase shifts: {} shifted encodings of the training utterances added ({} in \
                 all; --no-phase-shifts leaves them out)",
                shifts.added,
                pairs.train.len()
            );
        }
        shifts.utterances
    };
    let streams = args.streams.unwrap_or(pairs.n_q);
    anyhow::ensure!(
        (1..=pairs.n_q).contains(&streams),
        "--streams {streams}: the token store {} has {} streams",
        common.tokens.display(),
        pairs.n_q
    );
    // Durations in units from the manifests' alignments (the pairs carry them in frames).
    manifest.extend(voxspec_data::read_split_if_present(&common.data, "dev")?);
    let durations = duration_units(
        manifest.iter().chain(&shifted),
        pairs.train.iter().chain(&pairs.dev),
        pairs.frame_rate,
    );
    let with_units = durations.covered(&pairs.train);
    let aligned = match args.alignment {
        AlignmentMode::Off => false,
        AlignmentMode::Auto => with_units > 0 && with_units * 10 >= pairs.train.len() * 9,
        AlignmentMode::On => {
            anyhow::ensure!(
                with_units == pairs.train.len(),
                "--alignment on: {} of {} training utterances have no usable alignment (they \
                 need a phoneme tokenizer and alignments in the manifest: `voxspec prepare` \
                 with TextGrids)",
                pairs.train.len() - with_units,
                pairs.train.len()
            );
            true
        }
    };
    println!(
        "multi-stream LM: {streams} streams at {:.0} ms, delay {}, {} ({with_units} of {} \
         training utterances aligned{})",
        1000.0 / pairs.frame_rate,
        if args.base.is_some() || args.target.is_some() {
            "as the base's".to_string()
        } else {
            args.delay.to_string()
        },
        if aligned {
            "aligned (step track + duration predictor)"
        } else {
            "plain (alignment left to attention)"
        },
        pairs.train.len(),
        if durations.refused > 0 {
            format!(", {} alignments refused", durations.refused)
        } else {
            String::new()
        }
    );
    // Every recording with codes gets its voice; a shifted encoding is voiced as its recording.
    let device = voxspec_train::device::single()?;
    let voices = pair_voices(
        &args.codec,
        (&manifest, &shifted),
        &pairs,
        &Bar::new(),
        &device,
    )?;
    if voices.too_short > 0 {
        println!(
            "{} utterances are shorter than the codec's voice window: left out",
            voices.too_short
        );
    }
    let (train_items, dev_items) = voices.items(&pairs, &durations.units, aligned)?;
    println!(
        "{} training and {} dev utterances",
        train_items.len(),
        dev_items.len()
    );

    if let Some(target) = &args.target {
        return draft(&args, target, &pairs, (train_items, dev_items));
    }
    if let Some(base) = &args.base {
        return heads_on(&args, base, &pairs, (train_items, dev_items));
    }
    let vocab = pairs.tokenizer.vocab_size();
    let preset = MultiStreamConfig::preset(args.preset, vocab, pairs.codebook, streams);
    if let Some(p) = args.dropout {
        anyhow::ensure!((0.0..1.0).contains(&p), "--dropout {p} must be in [0, 1)");
    }
    anyhow::ensure!(args.mtp_heads >= 1, "--mtp-heads must be at least 1");
    let mtp =
        (args.mtp_heads > 1).then(|| MsMtpConfig::new(args.mtp_heads).with_weight(args.mtp_weight));
    if let Some(mtp) = &mtp {
        mtp.validate().map_err(anyhow::Error::msg)?;
    }
    let options = MsModelOptions {
        delay: args.delay,
        global_dim: voices.dim,
        dropout: args.dropout,
        mtp,
        aligned_frame_rate: aligned.then_some(pairs.frame_rate),
    };
    let settings = crate::train_lm::run_settings(
        common,
        "multistream",
        MultiStreamSettings {
            model: preset.for_items(&options, train_items.iter().chain(&dev_items)),
            task: MultiStreamTaskConfig {
                bucket: crate::train_lm::bucket(common, true),
            },
            codec: args.codec.display().to_string(),
            code_dropout: args.code_dropout,
        },
    )?;
    anyhow::ensure!(
        (0.0..1.0).contains(&settings.code_dropout),
        "--code-dropout {} must be in [0, 1)",
        settings.code_dropout
    );
    let task = settings.task(train_items, dev_items)?;
    let (model, _) =
        crate::train_lm::train(common, task, Vec::new(), &voxspec_train::device::training())?;
    save_run(&common.out, &settings.file(), &model, &pairs)?;
    println!("model: {}", common.out.join("model.safetensors").display());
    Ok(())
}

/// `train multistream --target`: a draft cut from the target's layers.
fn draft(
    args: &MultiStreamArgs,
    target_dir: &Path,
    pairs: &TrainingPairs,
    items: (Vec<MsItem>, Vec<MsItem>),
) -> anyhow::Result<()> {
    let common = &args.common;
    let device = voxspec_train::device::single()?.autodiff();
    let target = FrozenLm::load(target_dir, true, (pairs, &items.0), &device)?;
    let spec = DraftSpec::parse(&args.layers)?;
    let settings = crate::train_lm::run_settings(
        common,
        "multistream-draft",
        DraftSettings {
            target: target_dir.to_path_buf(),
            spec,
            bucket: crate::train_lm::bucket(common, true),
        },
    )?;
    let target_layers = target.file.model.transformer.n_layers;
    let DraftRun {
        task,
        freeze,
        file,
        layers,
    } = settings.run(target, items)?;
    let (model, _) = crate::train_lm::train(common, task, freeze, std::slice::from_ref(&device))?;
    save_run(&common.out, &file, &model, pairs)?;
    println!(
        "draft ({} of {target_layers} target layers): {}",
        layers.len(),
        common.out.join("model.safetensors").display()
    );
    Ok(())
}

/// `train multistream --base`: multi-token heads on a trained, frozen LM.
fn heads_on(
    args: &MultiStreamArgs,
    base_dir: &Path,
    pairs: &TrainingPairs,
    items: (Vec<MsItem>, Vec<MsItem>),
) -> anyhow::Result<()> {
    let common = &args.common;
    anyhow::ensure!(
        args.mtp_heads >= 2,
        "--base trains multi-token heads: give --mtp-heads 2 or more"
    );
    let device = voxspec_train::device::single()?.autodiff();
    let base = FrozenLm::load(base_dir, false, (pairs, &items.0), &device)?;
    let settings = crate::train_lm::run_settings(
        common,
        "multistream",
        HeadsSettings {
            base: base_dir.to_path_buf(),
            mtp: MsMtpConfig::new(args.mtp_heads).with_weight(args.mtp_weight),
            bucket: crate::train_lm::bucket(common, true),
            code_dropout: args.code_dropout,
        },
    )?;
    settings.mtp.validate().map_err(anyhow::Error::msg)?;
    let HeadsRun { task, freeze, file } = settings.run(base, items, &device)?;
    let (model, _) = crate::train_lm::train(common, task, freeze, std::slice::from_ref(&device))?;
    save_run(&common.out, &file, &model, pairs)?;
    println!(
        "{} multi-token heads on the frozen {}: {}",
        settings.mtp.heads - 1,
        base_dir.display(),
        common.out.join("model.safetensors").display()
    );
    Ok(())
}
