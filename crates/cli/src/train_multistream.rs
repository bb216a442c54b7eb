//! `voxspec train multistream`: the delayed multi-stream LM on the tokens of a SoCodec-style
//! codec (`voxspec codec extract` with a `--kind socodec` codec), through the one training loop.
//!
//! Every utterance is conditioned on a voice vector (the mean of the codec's global embeddings
//! of its speaker's other recordings: at inference the reference is never the target) and, for an aligned model, on the phones of
//! the coming frames (durations from the manifest's forced alignments in 20 ms units). The run
//! directory ends with the model directory (`config.json` kind `multistream` +
//! `model.safetensors`, and with `--mtp-heads` one `transitions-<j>.safetensors` per stream)
//! and `tokenizer.json`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::module::Module;
use clap::Args;
use serde::{Deserialize, Serialize};
use voxspec_codec::load_socodec;
use voxspec_data::{BucketConfig, TokenStore, Utterance};
use voxspec_draft::DraftSpec;
use voxspec_multistream::{
    DurationUnits, MsAlignConfig, MsFile, MsItem, MsMtpConfig, MultiStreamConfig, MultiStreamData,
    MultiStreamTask, MultiStreamTaskConfig, base_freeze_patterns, cut_draft, draft_freeze_patterns,
    duration_units, load_multistream, phase_shifted, positions_needed, save_multistream,
    save_stream_transitions, stream_transitions, units_per_frame, voice_vectors, voiced_items,
    with_fresh_heads,
};

use crate::progress::Bar;
use crate::train_lm::{AlignmentMode, LmCommon, LmPreset};

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
    /// Model size.
    #[arg(long, value_enum, default_value = "small")]
    preset: LmPreset,
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

#[derive(Debug, Serialize, Deserialize)]
struct MultiStreamSettings {
    model: MultiStreamConfig,
    task: MultiStreamTaskConfig,
    codec: String,
    #[serde(default)]
    code_dropout: f32,
}

/// Adds the phase-shifted encodings the training token store holds (`codec extract
/// --phase-shifts`) to `pairs.train`; returns their manifest entries. `train` is the training
/// split's manifest.
fn add_phase_shifts(
    common: &LmCommon,
    train: &[voxspec_data::Utterance],
    pairs: &mut crate::train_lm::Pairs,
) -> anyhow::Result<Vec<voxspec_data::Utterance>> {
    let store = TokenStore::open(&common.tokens, "train")
        .with_context(|| format!("opening the train token store {}", common.tokens.display()))?;
    let (shifted, items) = phase_shifted(train, &pairs.train, &store, &pairs.tokenizer)?;
    if shifted.is_empty() {
        return Ok(shifted);
    }
    let before = pairs.train.len();
    pairs.train.extend(items);
    println!(
        "phase shifts: {} shifted encodings of the training utterances added ({} in all; \
         --no-phase-shifts leaves them out)",
        pairs.train.len() - before,
        pairs.train.len()
    );
    Ok(shifted)
}

pub fn multistream(args: MultiStreamArgs) -> anyhow::Result<()> {
    let common = &args.common;
    let mut pairs = crate::train_lm::load_pairs(common)?;
    let mut manifest = voxspec_data::read_split_if_present(&common.data, "train")?;
    let shifted = if args.no_phase_shifts {
        Vec::new()
    } else {
        add_phase_shifts(common, &manifest, &mut pairs)?
    };
    let streams = args.streams.unwrap_or(pairs.n_q);
    anyhow::ensure!(
        (1..=pairs.n_q).contains(&streams),
        "--streams {streams}: the token store {} has {} streams",
        common.tokens.display(),
        pairs.n_q
    );
    let r = units_per_frame(pairs.frame_rate);
    // Durations in units from the manifests' alignments (the pairs carry them in frames).
    manifest.extend(voxspec_data::read_split_if_present(&common.data, "dev")?);
    let DurationUnits {
        units,
        refused: misaligned,
    } = duration_units(
        manifest.iter().chain(&shifted),
        pairs.train.iter().chain(&pairs.dev),
        pairs.frame_rate,
    );
    let with_units = pairs
        .train
        .iter()
        .filter(|i| units.contains_key(&i.id))
        .count();
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
        if misaligned > 0 {
            format!(", {misaligned} alignments refused")
        } else {
            String::new()
        }
    );
    // Every recording with codes gets its voice; a shifted encoding is voiced as its recording.
    let with_codes: HashSet<&str> = pairs
        .train
        .iter()
        .chain(&pairs.dev)
        .map(|i| i.id.as_str())
        .collect();
    let recordings: Vec<Utterance> = manifest
        .iter()
        .filter(|u| with_codes.contains(u.id.as_str()))
        .cloned()
        .collect();
    let device = crate::device::single()?;
    let (config, codec) = load_socodec(&args.codec, &device)
        .with_context(|| format!("loading the codec {}", args.codec.display()))?;
    let mut voices = voice_vectors(&codec, &config, &recordings, &Bar::new(), &device)?;
    if voices.too_short > 0 {
        println!(
            "{} utterances are shorter than the codec's voice window: left out",
            voices.too_short
        );
    }
    voices.add_shifted(&shifted);
    let global_dim = voices.dim;
    let voices = voices.vectors;
    let train_items = voiced_items(&pairs.train, &voices, &units, aligned);
    let dev_items = voiced_items(&pairs.dev, &voices, &units, aligned);
    anyhow::ensure!(
        !train_items.is_empty(),
        "no training utterance has both a voice vector and (aligned) durations"
    );
    println!(
        "{} training and {} dev utterances",
        train_items.len(),
        dev_items.len()
    );

    if let Some(target) = &args.target {
        return draft(&args, target, &pairs, train_items, dev_items);
    }
    if let Some(base) = &args.base {
        return heads_on(&args, base, &pairs, train_items, dev_items);
    }
    let vocab = pairs.tokenizer.vocab_size();
    let mut model = match args.preset {
        LmPreset::Tiny => MultiStreamConfig::tiny(vocab, pairs.codebook, streams),
        LmPreset::Small => MultiStreamConfig::small(vocab, pairs.codebook, streams),
        LmPreset::Base => MultiStreamConfig::base(vocab, pairs.codebook, streams),
    }
    .with_delay(args.delay)
    .with_global_dim(global_dim);
    if let Some(p) = args.dropout {
        anyhow::ensure!((0.0..1.0).contains(&p), "--dropout {p} must be in [0, 1)");
        model.transformer.dropout = p;
    }
    anyhow::ensure!(args.mtp_heads >= 1, "--mtp-heads must be at least 1");
    if args.mtp_heads > 1 {
        let mtp = MsMtpConfig::new(args.mtp_heads).with_weight(args.mtp_weight);
        mtp.validate().map_err(anyhow::Error::msg)?;
        model.mtp = Some(mtp);
    }
    if aligned {
        // Every stream sees the phones of the frame it predicts (stream j is d·j steps late).
        model.align = Some(
            MsAlignConfig::new()
                .with_units_per_frame(r)
                .with_frames_behind(args.delay * (streams - 1)),
        );
    }
    model.transformer.max_seq_len = model.transformer.max_seq_len.max(positions_needed(
        train_items.iter().chain(&dev_items),
        args.delay,
        streams,
    ));
    let settings = crate::train_lm::run_settings(
        common,
        "multistream",
        MultiStreamSettings {
            model,
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
    let valid_bucket = BucketConfig {
        shuffle: false,
        ..settings.task.bucket.clone()
    };
    let task = MultiStreamTask {
        model: settings.model.clone(),
        task: settings.task.clone(),
        train: MultiStreamData::new(train_items, &settings.model, settings.task.bucket.clone())?
            .with_code_dropout(settings.code_dropout),
        valid: if dev_items.is_empty() {
            None
        } else {
            Some(
                MultiStreamData::new(dev_items, &settings.model, valid_bucket)?
                    .with_shuffled_text(),
            )
        },
        init: None,
    };
    let (model, _) = crate::train_lm::train(common, task, Vec::new(), &crate::device::training())?;
    let file = MsFile {
        model: settings.model,
        codec: Some(settings.codec),
        draft: None,
    };
    save_multistream(&common.out, &file, &model)?;
    if file.model.mtp.is_some() {
        save_stream_transitions(
            &common.out,
            &stream_transitions(&pairs.train, streams, pairs.codebook)?,
        )?;
    }
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!("model: {}", common.out.join("model.safetensors").display());
    Ok(())
}

#[derive(Debug, Serialize, Deserialize)]
struct DraftSettings {
    target: PathBuf,
    spec: DraftSpec,
    bucket: BucketConfig,
}

/// `train multistream --target`: a draft cut from the target's layers.
fn draft(
    args: &MultiStreamArgs,
    target_dir: &Path,
    pairs: &crate::train_lm::Pairs,
    train_items: Vec<MsItem>,
    dev_items: Vec<MsItem>,
) -> anyhow::Result<()> {
    let common = &args.common;
    let device = crate::device::single()?.autodiff();
    let (target_file, target) = load_multistream(target_dir, &device)
        .with_context(|| format!("loading the target {}", target_dir.display()))?;
    anyhow::ensure!(
        target_file.draft.is_none(),
        "{} is itself a draft: give the target's run directory",
        target_dir.display()
    );
    let t = &target_file.model;
    anyhow::ensure!(
        t.text_vocab == pairs.tokenizer.vocab_size() && t.codebook_size == pairs.codebook,
        "the target reads {} text tokens and {} codes; the data has {} and {}",
        t.text_vocab,
        t.codebook_size,
        pairs.tokenizer.vocab_size(),
        pairs.codebook
    );
    anyhow::ensure!(
        t.align.is_none() || train_items.iter().all(|i| i.durations.is_some()),
        "the target is aligned; the training utterances need alignments"
    );
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
    // The target's weights are constants; the loop's freeze list decides what trains.
    let (config, model) = cut_draft(&target.no_grad(), t, &settings.spec)?;
    let layers = settings.spec.resolve(t.transformer.n_layers)?;
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig {
            bucket: settings.bucket.clone(),
        },
        train: MultiStreamData::new(train_items, &config, settings.bucket.clone())?,
        valid: if dev_items.is_empty() {
            None
        } else {
            let bucket = BucketConfig {
                shuffle: false,
                ..settings.bucket.clone()
            };
            Some(MultiStreamData::new(dev_items, &config, bucket)?)
        },
        init: Some(model),
    };
    let freeze = draft_freeze_patterns(&settings.spec)?;
    let (model, _) = crate::train_lm::train(common, task, freeze, std::slice::from_ref(&device))?;
    let file = MsFile {
        model: config,
        codec: target_file.codec.clone(),
        draft: Some(serde_json::json!({
            "target": target_dir.display().to_string(),
            "layers": layers,
            "target_n_layers": t.transformer.n_layers,
            "spec": settings.spec,
        })),
    };
    save_multistream(&common.out, &file, &model)?;
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!(
        "draft ({} of {} target layers): {}",
        layers.len(),
        t.transformer.n_layers,
        common.out.join("model.safetensors").display()
    );
    Ok(())
}

#[derive(Debug, Serialize, Deserialize)]
struct HeadsSettings {
    base: PathBuf,
    mtp: MsMtpConfig,
    bucket: BucketConfig,
    code_dropout: f32,
}

/// `train multistream --base`: multi-token heads on a trained, frozen LM.
fn heads_on(
    args: &MultiStreamArgs,
    base_dir: &Path,
    pairs: &crate::train_lm::Pairs,
    train_items: Vec<MsItem>,
    dev_items: Vec<MsItem>,
) -> anyhow::Result<()> {
    let common = &args.common;
    anyhow::ensure!(
        args.mtp_heads >= 2,
        "--base trains multi-token heads: give --mtp-heads 2 or more"
    );
    let device = crate::device::single()?.autodiff();
    let (base_file, base) = load_multistream(base_dir, &device)
        .with_context(|| format!("loading the base LM {}", base_dir.display()))?;
    anyhow::ensure!(
        base_file.draft.is_none(),
        "{} is a draft: give a multi-stream LM's run directory",
        base_dir.display()
    );
    let b = &base_file.model;
    anyhow::ensure!(
        b.text_vocab == pairs.tokenizer.vocab_size() && b.codebook_size == pairs.codebook,
        "the base LM reads {} text tokens and {} codes; the data has {} and {}",
        b.text_vocab,
        b.codebook_size,
        pairs.tokenizer.vocab_size(),
        pairs.codebook
    );
    anyhow::ensure!(
        b.align.is_none() || train_items.iter().all(|i| i.durations.is_some()),
        "the base LM is aligned; the training utterances need alignments"
    );
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
    let config = MultiStreamConfig {
        mtp: Some(settings.mtp.clone()),
        ..b.clone()
    };
    // The base's weights are constants; only the new heads are trainable.
    let model = with_fresh_heads(base, &config, settings.mtp.heads, &device);
    let valid_bucket = BucketConfig {
        shuffle: false,
        ..settings.bucket.clone()
    };
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig {
            bucket: settings.bucket.clone(),
        },
        train: MultiStreamData::new(train_items, &config, settings.bucket.clone())?
            .with_code_dropout(settings.code_dropout),
        valid: if dev_items.is_empty() {
            None
        } else {
            Some(MultiStreamData::new(dev_items, &config, valid_bucket)?)
        },
        init: Some(model),
    };
    let freeze = base_freeze_patterns();
    let (model, _) = crate::train_lm::train(common, task, freeze, std::slice::from_ref(&device))?;
    let file = MsFile {
        model: config,
        codec: base_file.codec.clone(),
        draft: None,
    };
    save_multistream(&common.out, &file, &model)?;
    save_stream_transitions(
        &common.out,
        &stream_transitions(&pairs.train, file.model.streams, pairs.codebook)?,
    )?;
    pairs.tokenizer.save(&common.out.join("tokenizer.json"))?;
    println!(
        "{} multi-token heads on the frozen {}: {}",
        settings.mtp.heads - 1,
        base_dir.display(),
        common.out.join("model.safetensors").display()
    );
    Ok(())
}
