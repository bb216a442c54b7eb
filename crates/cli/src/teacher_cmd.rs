//! `voxspec teacher extract | transcribe`: semantic-teacher features of a prepared corpus, and
//! the CTC teacher's transcripts scored against their text (character error rate).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use voxspec_data::read_manifest;
use voxspec_teacher::{
    AnyTeacher, LayerSelection, PhoneSplit, SplitFeatures, extract_split, phones_meta,
    write_phone_split,
};

use crate::common::load_ctc_teacher;
use crate::progress::Bar;
use crate::train_cmd::score_manifest;

#[derive(Debug, Subcommand)]
pub enum TeacherCommand {
    /// Write a teacher's frame features for every split of a prepared corpus.
    Extract(ExtractArgs),
    /// Transcribe a manifest's audio with a CTC teacher and print the character error rate.
    Transcribe(TranscribeArgs),
    /// Write phone-code features from the manifests' forced alignments (a teacher that knows
    /// the corpus's speaker: `voxspec align` makes the alignments).
    Phones(PhonesArgs),
}

/// Write phone-identity features for the train, dev and test splits: each frame is the fixed
/// ±1/√dim code of the phone its alignment speaks (silence and the 39 ARPAbet phones each have
/// one, nearly orthogonal to the others), in the feature-store format of `teacher extract`
/// (teacher "phones").
/// As `codec train --teacher-features` it makes RVQ-1 encode the phones. Utterances without an
/// alignment in the manifest are left out (counted).
#[derive(Debug, Args)]
pub struct PhonesArgs {
    /// Prepared data directory whose manifests carry alignments (`voxspec prepare` after
    /// `voxspec align`, or with TextGrids).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Output directory of the feature shards.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Feature width (at least 40; a codec fine-tuned with `codec train --init` needs its own
    /// semantic dimension).
    #[arg(long, default_value_t = 144)]
    dim: usize,
    /// Frames per second (the codec's frame rate).
    #[arg(long, default_value_t = 50.0)]
    frame_rate: f32,
    /// Sample rate recorded in the store's metadata (the codec's).
    #[arg(long, default_value_t = 16_000)]
    sample_rate: u32,
    /// Splits to write (comma separated; a split without a manifest is skipped).
    #[arg(long, value_delimiter = ',', default_value = "train,dev,test")]
    splits: Vec<String>,
}

/// Write semantic-teacher features for the train, dev and test splits.
///
/// The teacher is a CTC run directory (`voxspec train ctc` output: config.json with
/// "kind": "ctc", model.safetensors, tokenizer.json) or a Hugging Face HuBERT / wav2vec2
/// directory (config.json + model.safetensors). Output: <OUT>/<split>-NNNNN.safetensors, one F32
/// tensor [frames, dim] per utterance id, with header metadata format=voxspec-features,
/// dim, frame_rate, sample_rate, teacher, layer. Finished shards are kept: rerunning after an
/// interruption computes only the missing utterances. Audio is resampled to the teacher's rate.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Teacher directory (CTC run or HuBERT/wav2vec2 checkpoint).
    #[arg(long, value_name = "DIR")]
    teacher: PathBuf,
    /// Prepared data directory (train.jsonl, dev.jsonl, test.jsonl).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Output directory of the feature shards.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Hidden state: an index (0 = transformer input) or `mean` (mean of all). Default: the
    /// CTC teacher's saved feature layer; `mean` for HuBERT (SpeechTokenizer's target).
    #[arg(long, value_name = "L|mean")]
    layer: Option<String>,
    /// Splits to extract (comma separated; a split without a manifest is skipped).
    #[arg(long, value_delimiter = ',', default_value = "train,dev,test")]
    splits: Vec<String>,
    /// Utterances per forward pass (CTC teacher).
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Frames per shard before a new shard starts.
    #[arg(long, default_value_t = 100_000)]
    shard_frames: usize,
}

/// Transcribe every utterance of a manifest with a CTC teacher and score the transcripts against
/// the manifest text (normalised as the teacher's vocabulary is): prints the corpus character
/// error rate (total edits / total reference characters) and a few examples.
#[derive(Debug, Args)]
pub struct TranscribeArgs {
    /// CTC teacher directory (`voxspec train ctc` output).
    #[arg(long, value_name = "DIR")]
    teacher: PathBuf,
    /// Manifest to transcribe (JSON lines with id, path, text).
    #[arg(long, value_name = "JSONL")]
    manifest: PathBuf,
    /// Also write one JSON line per utterance (id, reference, hypothesis, edits, chars, cer).
    #[arg(long, value_name = "JSONL")]
    out: Option<PathBuf>,
    /// Utterances per forward pass.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Examples to print.
    #[arg(long, default_value_t = 3)]
    show: usize,
}

pub fn run(cmd: TeacherCommand) -> anyhow::Result<()> {
    match cmd {
        TeacherCommand::Extract(args) => extract(args),
        TeacherCommand::Transcribe(args) => transcribe(args),
        TeacherCommand::Phones(args) => phones(args),
    }
}

fn phones(args: PhonesArgs) -> anyhow::Result<()> {
    let meta = phones_meta(args.dim, args.frame_rate, args.sample_rate);
    for crate::prepare::SplitManifest {
        name: split,
        path: manifest,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let PhoneSplit {
            written,
            unaligned,
            frames,
        } = write_phone_split((&args.out, &split), &meta, &utterances, &manifest)?;
        println!(
            "{split}: {written} utterances written ({frames} frames), {unaligned} without an \
             alignment left out"
        );
    }
    Ok(())
}

fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let layer = args
        .layer
        .as_deref()
        .map(|l| {
            l.parse::<LayerSelection>()
                .with_context(|| format!("--layer {l:?} is neither an index nor `mean`"))
        })
        .transpose()?;
    let teacher = AnyTeacher::load(&args.teacher, layer, &device)?;
    let meta = teacher.store_meta();
    println!(
        "teacher {} ({}, layer {}): {}-d at {} Hz",
        args.teacher.display(),
        meta.teacher,
        meta.layer,
        meta.dim,
        meta.frame_rate
    );
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let SplitFeatures {
            written,
            kept,
            frames,
        } = extract_split(
            &teacher,
            &utterances,
            (&args.out, &split),
            (args.batch, args.shard_frames),
            &Bar::new(),
        )?;
        println!("{split}: {written} utterances written ({frames} frames), {kept} already there");
    }
    println!("features: {}", args.out.display());
    Ok(())
}

fn transcribe(args: TranscribeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let utterances = read_manifest(&args.manifest)?;
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no utterances",
        args.manifest.display()
    );
    let mut lines = Vec::new();
    let counts = score_manifest(&teacher, &utterances, args.batch, Some(&mut lines))?;
    for line in lines.iter().take(args.show) {
        println!(
            "{}\n  ref: {}\n  hyp: {}",
            line["id"].as_str().unwrap_or(""),
            line["reference"].as_str().unwrap_or(""),
            line["hypothesis"].as_str().unwrap_or("")
        );
    }
    if let Some(out) = &args.out {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        voxspec_data::write_atomic(out, text.as_bytes())?;
        println!("per-utterance scores: {}", out.display());
    }
    println!(
        "CER: {:.2}% over {} utterances ({} substitutions, {} deletions, {} insertions / {} \
         characters)",
        100.0 * counts.rate(),
        utterances.len(),
        counts.substitutions,
        counts.deletions,
        counts.insertions,
        counts.reference_len
    );
    Ok(())
}
