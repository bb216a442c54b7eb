//! `voxspec teacher extract | transcribe`: semantic-teacher features of a prepared corpus, and
//! the CTC teacher's transcripts scored against their text (character error rate).

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::tensor::{Device, Tensor};
use clap::{Args, Subcommand};
use rayon::prelude::*;
use voxspec_data::{Progress, Utterance, read_manifest};
use voxspec_teacher::ctc::{CTC_KIND, CtcTeacher};
use voxspec_teacher::{
    FeatureStoreMeta, FeatureStoreWriter, Features, Hubert, HubertTeacher, LayerSelection,
    SemanticTeacher,
};

use crate::common::{is_ctc_dir, load_ctc_teacher};
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

/// A loaded teacher of either kind.
enum AnyTeacher {
    Ctc(Box<CtcTeacher>),
    Hubert(Box<HubertTeacher>),
}

impl AnyTeacher {
    fn as_teacher(&self) -> &dyn SemanticTeacher {
        match self {
            AnyTeacher::Ctc(t) => t.as_ref(),
            AnyTeacher::Hubert(t) => t.as_ref(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            AnyTeacher::Ctc(_) => CTC_KIND,
            AnyTeacher::Hubert(_) => "hubert",
        }
    }

    /// Features of several waveforms (batched for the CTC teacher).
    fn features(&self, waves: &[&[f32]]) -> anyhow::Result<Vec<Tensor<2>>> {
        Ok(match self {
            AnyTeacher::Ctc(t) => t.features_batch(waves)?,
            AnyTeacher::Hubert(t) => waves
                .iter()
                .map(|w| t.features(w))
                .collect::<Result<_, _>>()?,
        })
    }
}

fn parse_layer(layer: &str) -> anyhow::Result<LayerSelection> {
    if layer.eq_ignore_ascii_case("mean") {
        return Ok(LayerSelection::MeanOfAll);
    }
    layer
        .parse()
        .map(LayerSelection::Index)
        .with_context(|| format!("--layer {layer:?} is neither an index nor `mean`"))
}

fn layer_name(layer: LayerSelection) -> String {
    match layer {
        LayerSelection::Index(i) => i.to_string(),
        LayerSelection::MeanOfAll => "mean".into(),
    }
}

/// Whether `dir/config.json` names a CTC teacher.
fn load_teacher(
    dir: &Path,
    layer: Option<&str>,
    device: &Device,
) -> anyhow::Result<(AnyTeacher, LayerSelection)> {
    let layer = layer.map(parse_layer).transpose()?;
    if is_ctc_dir(dir)? {
        let mut teacher = CtcTeacher::load(dir, device)
            .with_context(|| format!("loading the CTC teacher {}", dir.display()))?;
        if let Some(layer) = layer {
            teacher = teacher.with_layer(layer)?;
        }
        let layer = teacher.layer();
        Ok((AnyTeacher::Ctc(Box::new(teacher)), layer))
    } else {
        let layer = layer.unwrap_or(LayerSelection::MeanOfAll);
        let model = Hubert::load(dir, device)
            .with_context(|| format!("loading the HuBERT teacher {}", dir.display()))?;
        Ok((
            AnyTeacher::Hubert(Box::new(HubertTeacher::new(model, layer)?)),
            layer,
        ))
    }
}

fn phones(args: PhonesArgs) -> anyhow::Result<()> {
    let meta = FeatureStoreMeta {
        dim: args.dim,
        frame_rate: args.frame_rate,
        sample_rate: args.sample_rate,
        teacher: voxspec_teacher::PHONES_KIND.into(),
        layer: "code".into(),
    };
    for crate::prepare::SplitManifest {
        name: split,
        path: manifest,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let split = split.as_str();
        let mut writer = FeatureStoreWriter::new(&args.out, split, meta.clone(), 100_000)?;
        let (mut written, mut unaligned, mut frames) = (0usize, 0usize, 0usize);
        for u in &utterances {
            let Some(alignment) = &u.alignment else {
                unaligned += 1;
                continue;
            };
            if writer.contains(&u.id) {
                continue;
            }
            let f =
                voxspec_teacher::phone_features(alignment, f64::from(args.frame_rate), args.dim)
                    .with_context(|| format!("utterance {} of {}", u.id, manifest.display()))?;
            frames += f.frames;
            writer.push(&u.id, f)?;
            written += 1;
        }
        writer.finish()?;
        println!(
            "{split}: {written} utterances written ({frames} frames), {unaligned} without an \
             alignment left out"
        );
    }
    Ok(())
}

fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (teacher, layer) = load_teacher(&args.teacher, args.layer.as_deref(), &device)?;
    let t = teacher.as_teacher();
    let meta = FeatureStoreMeta {
        dim: t.dim(),
        frame_rate: t.frame_rate(),
        sample_rate: t.sample_rate(),
        teacher: teacher.kind().into(),
        layer: layer_name(layer),
    };
    println!(
        "teacher {} ({}, layer {}): {}-d at {} Hz",
        args.teacher.display(),
        meta.teacher,
        meta.layer,
        meta.dim,
        meta.frame_rate
    );
    let rate = t.sample_rate();
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let split = split.as_str();
        let mut writer =
            FeatureStoreWriter::new(&args.out, split, meta.clone(), args.shard_frames)?;
        let todo: Vec<&Utterance> = utterances
            .iter()
            .filter(|u| !writer.contains(&u.id))
            .collect();
        let kept = utterances.len() - todo.len();
        let bar = Bar::with_len(todo.len() as u64, split);
        let mut frames = 0usize;
        for chunk in todo.chunks(args.batch.max(1)) {
            let waves = chunk
                .par_iter()
                .map(|u| {
                    voxspec_audio::load_resampled(Path::new(&u.path), rate)
                        .map(|a| a.samples)
                        .with_context(|| format!("utterance {}", u.id))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
            for (u, f) in chunk.iter().zip(teacher.features(&refs)?) {
                let [n, dim] = f.dims();
                let data = f
                    .into_data()
                    .try_into_vec_as::<f32>()
                    .map_err(|e| anyhow::anyhow!("reading the features of {}: {e:?}", u.id))?;
                frames += n;
                writer.push(
                    &u.id,
                    Features {
                        frames: n,
                        dim,
                        data,
                    },
                )?;
            }
            bar.inc(chunk.len() as u64);
        }
        writer.finish()?;
        bar.finish();
        println!(
            "{split}: {} utterances written ({frames} frames), {kept} already there",
            todo.len()
        );
    }
    println!("features: {}", args.out.display());
    Ok(())
}

fn transcribe(args: TranscribeArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
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
