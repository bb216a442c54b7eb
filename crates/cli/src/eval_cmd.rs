//! `voxspec eval intelligibility`: forced-choice sentence identification by the CTC teacher
//! (`voxspec_teacher::ctc::forced_choice`), with the teacher's greedy CER beside it.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use rayon::prelude::*;
use serde::Serialize;
use voxspec_data::{Progress, read_manifest};
use voxspec_teacher::SemanticTeacher;
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, ForcedChoiceSummary, LengthNorm};

use crate::common::{DEFAULT_TEACHER, load_ctc_teacher};
use crate::progress::Bar;

/// One-line definition written into the JSON report.
const DEFINITION: &str = "forced-choice sentence identification: each clip's CTC \
    log-likelihood log p(y_k | clip) under the teacher, divided by the length of y_k \
    unless length_norm is none, scores every candidate transcript y_k; a clip is identified when its own transcript scores strictly highest \
    (ties count against); accuracy = identified / clips, chance = 1 / candidates";

#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Forced-choice sentence identification (accuracy against chance) and greedy CER of
    /// clips by the CTC teacher.
    Intelligibility(IntelligibilityArgs),
}

/// Which transcripts does the audio say? An intelligibility measure that can fail.
///
/// For every clip, the CTC teacher's frame log-probabilities are computed once, and every
/// candidate sentence y_k is scored by its CTC log-likelihood log p(y_k | clip) (the forward
/// algorithm, summing over all alignments) per label of y_k. The clip is *identified* when its own transcript
/// scores strictly highest among the N candidates (ties count against). Accuracy is
/// identified / clips; a clip carrying no information about its sentence (noise, silence,
/// babble) is identified at chance, 1/N, whatever the recogniser's error rate. The teacher's
/// greedy character error rate (total edits / total reference characters) is reported beside
/// it.
///
/// Candidates default to the transcripts of the input clips themselves (deduplicated after the
/// teacher's normalisation); each clip's own transcript must be among them. Prints a summary
/// table and the misidentified clips; --out writes JSON with per-clip rank, scores, own and
/// best text.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("input").required(true).args(["manifest", "dir"])))]
pub struct IntelligibilityArgs {
    /// Clips as a manifest: JSON lines with id, path, text (`voxspec prepare` output).
    #[arg(long, value_name = "JSONL")]
    manifest: Option<PathBuf>,
    /// Clips as a directory of audio files (wav, flac, mp3, ogg), each with its transcript
    /// in <NAME>.txt beside it.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Candidate sentences: a manifest (*.jsonl, its texts) or a text file with one sentence
    /// per line [default: the transcripts of the clips].
    #[arg(long, value_name = "FILE")]
    candidates: Option<PathBuf>,
    /// CTC teacher directory (`voxspec train ctc` output).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_TEACHER)]
    teacher: PathBuf,
    /// Where to write the JSON report.
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Candidate score: `per-label` = log p(y|x) / len(y) (raw log p favours short
    /// candidates), `none` = log p(y|x).
    #[arg(long, value_enum, default_value_t = NormArg::PerLabel)]
    length_norm: NormArg,
    /// Clips per teacher forward.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Misidentified clips to print.
    #[arg(long, default_value_t = 5)]
    show: usize,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
}

/// `--length-norm` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum NormArg {
    None,
    PerLabel,
}

impl From<NormArg> for LengthNorm {
    fn from(n: NormArg) -> Self {
        match n {
            NormArg::None => LengthNorm::None,
            NormArg::PerLabel => LengthNorm::PerLabel,
        }
    }
}

/// One input clip.
struct Clip {
    id: String,
    path: PathBuf,
    text: String,
}

/// One clip's line in the report.
#[derive(Debug, Serialize)]
struct ClipReport {
    id: String,
    path: PathBuf,
    own_text: String,
    best_text: String,
    rank: usize,
    identified: bool,
    own_score: f64,
    best_score: f64,
    hypothesis: String,
    cer: f64,
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct Report {
    measure: &'static str,
    teacher: PathBuf,
    input: PathBuf,
    candidates_from: String,
    length_norm: LengthNorm,
    summary: ForcedChoiceSummary,
    /// The independent recogniser on the same clips and candidates, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    asr: Option<voxspec_tts::AsrScore>,
    clips: Vec<ClipReport>,
}

pub fn run(cmd: EvalCommand) -> anyhow::Result<()> {
    match cmd {
        EvalCommand::Intelligibility(args) => intelligibility(args),
    }
}

/// Clips of a directory: every audio file with a `<name>.txt` transcript beside it, by name.
fn read_dir_clips(dir: &Path) -> anyhow::Result<Vec<Clip>> {
    const AUDIO: [&str; 4] = ["wav", "flac", "mp3", "ogg"];
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the directory {}", dir.display()))?;
    let mut audio = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading the directory {}", dir.display()))?
            .path();
        let is_audio = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| AUDIO.contains(&e.to_ascii_lowercase().as_str()));
        if is_audio && path.is_file() {
            audio.push(path);
        }
    }
    audio.sort();
    anyhow::ensure!(
        !audio.is_empty(),
        "{} has no audio files ({})",
        dir.display(),
        AUDIO.join(", ")
    );
    audio
        .into_iter()
        .map(|path| {
            let transcript = path.with_extension("txt");
            let text = std::fs::read_to_string(&transcript).with_context(|| {
                format!(
                    "{} has no readable transcript {}",
                    path.display(),
                    transcript.display()
                )
            })?;
            let id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(Clip {
                id,
                path,
                text: text.trim().to_string(),
            })
        })
        .collect()
}

/// Candidate sentences from a manifest (`*.jsonl`) or a text file, one per non-empty line.
fn read_candidates(path: &Path) -> anyhow::Result<Vec<String>> {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return Ok(read_manifest(path)
            .with_context(|| format!("reading the candidate manifest {}", path.display()))?
            .into_iter()
            .map(|u| u.text)
            .collect());
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the candidates {}", path.display()))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// Each clip's index in `set`, refusing a clip whose transcript is not a candidate.
fn own_indices(
    set: &ForcedChoice,
    teacher: &CtcTeacher,
    clips: &[Clip],
    from: &str,
) -> anyhow::Result<Vec<usize>> {
    clips
        .iter()
        .map(|c| {
            set.position(teacher.tokenizer(), &c.text)?.with_context(|| {
                format!(
                    "clip {} ({}): its transcript {:?} is not among the {} candidates of {from} \
                     (compared after the teacher's normalisation)",
                    c.id,
                    c.path.display(),
                    c.text,
                    set.len()
                )
            })
        })
        .collect()
}

fn intelligibility(args: IntelligibilityArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        args.teacher.join("config.json").is_file(),
        "no CTC teacher at {} (no config.json there); pass --teacher DIR (the default {} is \
         relative to the working directory)",
        args.teacher.display(),
        DEFAULT_TEACHER
    );
    let asr_judge = args.asr.judge()?;
    let (input, clips) = match (&args.manifest, &args.dir) {
        (Some(m), _) => {
            let utts = read_manifest(m)
                .with_context(|| format!("reading the manifest {}", m.display()))?;
            let clips = utts
                .into_iter()
                .map(|u| Clip {
                    id: u.id,
                    path: PathBuf::from(u.path),
                    text: u.text,
                })
                .collect::<Vec<_>>();
            (m.clone(), clips)
        }
        (None, Some(d)) => (d.clone(), read_dir_clips(d)?),
        (None, None) => anyhow::bail!("pass --manifest FILE or --dir DIR"),
    };
    anyhow::ensure!(!clips.is_empty(), "{} has no clips", input.display());
    let device = crate::device::single()?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let (candidates_from, texts) = match &args.candidates {
        Some(path) => (path.display().to_string(), read_candidates(path)?),
        None => (
            "the clips' own transcripts".to_string(),
            clips.iter().map(|c| c.text.clone()).collect(),
        ),
    };
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        texts.iter().map(String::as_str),
        args.length_norm.into(),
    )
    .with_context(|| format!("building the candidate set from {candidates_from}"))?;
    let own = own_indices(&set, &teacher, &clips, &candidates_from)?;

    let rate = teacher.sample_rate();
    let bar = Bar::with_len(clips.len() as u64, "identifying");
    let mut verdicts = Vec::with_capacity(clips.len());
    for (chunk, own) in clips.chunks(args.batch).zip(own.chunks(args.batch)) {
        let waves = chunk
            .par_iter()
            .map(|c| {
                voxspec_audio::load_resampled(&c.path, rate)
                    .map(|a| a.samples)
                    .with_context(|| format!("clip {} ({})", c.id, c.path.display()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
        let ids: Vec<&str> = chunk.iter().map(|c| c.id.as_str()).collect();
        verdicts.extend(
            teacher
                .forced_choice(&set, &refs, own)
                .with_context(|| format!("scoring the clips {}", ids.join(", ")))?,
        );
        bar.inc(chunk.len() as u64);
    }
    bar.finish();

    let summary = ForcedChoiceSummary::new(&verdicts, set.len());
    let text = |i: usize| set.text(i).unwrap_or_default().to_string();
    let per_clip: Vec<ClipReport> = clips
        .into_iter()
        .zip(verdicts)
        .map(|(c, v)| ClipReport {
            id: c.id,
            path: c.path,
            own_text: text(v.choice.own),
            best_text: text(v.choice.best),
            rank: v.choice.rank,
            identified: v.choice.identified,
            own_score: v.choice.own_score,
            best_score: v.choice.best_score,
            hypothesis: v.hypothesis,
            cer: v.errors.rate(),
        })
        .collect();

    println!(
        "teacher {}; {} clips from {}; {} candidates from {}",
        args.teacher.display(),
        summary.clips,
        input.display(),
        summary.candidates,
        candidates_from
    );
    println!(
        "\n| clips | candidates | identified | accuracy (%) | chance (%) | mean rank | CER (%) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        summary.clips,
        summary.candidates,
        summary.identified,
        100.0 * summary.accuracy,
        100.0 * summary.chance,
        summary.mean_rank,
        100.0 * summary.cer
    );
    let asr = match &asr_judge {
        Some(judge) => {
            let tmp = tempfile::tempdir().context("making a temporary folder")?;
            let candidates = tmp.path().join("candidates.txt");
            crate::asr_judge::write_candidates(&candidates, texts.iter().map(String::as_str))?;
            let report = tmp.path().join("asr.json");
            let jobs = rayon::current_num_threads();
            let score = if args.manifest.is_some() {
                judge.score_manifest(&input, &candidates, &report, jobs)?
            } else {
                judge.score_dir(&input, &candidates, &report, jobs)?
            };
            println!(
                "\nindependent recogniser (tools/asr_judge.py, pocketsphinx en-us): forced choice \
                 {:.1} % ± {:.1} % ({} clips), open-vocabulary WER {:.1} %, CER {:.1} %",
                100.0 * score.forced_choice,
                100.0 * score.forced_choice_se,
                score.clips,
                100.0 * score.wer,
                100.0 * score.cer
            );
            Some(score)
        }
        None => None,
    };
    let missed: Vec<&ClipReport> = per_clip.iter().filter(|c| !c.identified).collect();
    if !missed.is_empty() && args.show > 0 {
        println!(
            "\nmisidentified ({} clips, first {}):",
            missed.len(),
            args.show
        );
        for c in missed.iter().take(args.show) {
            println!(
                "  {} (rank {}):\n    own:  {}\n    best: {}",
                c.id, c.rank, c.own_text, c.best_text
            );
        }
    }
    if let Some(out) = &args.out {
        let report = Report {
            measure: DEFINITION,
            teacher: args.teacher.clone(),
            input,
            candidates_from,
            length_norm: set.length_norm(),
            summary,
            asr,
            clips: per_clip,
        };
        voxspec_data::write_atomic(out, &serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", out.display()))?;
        println!("\nreport: {}", out.display());
    }
    Ok(())
}
