//! `voxspec eval intelligibility`: forced-choice sentence identification by the CTC teacher
//! (`voxspec_teacher::ctc::forced_choice`), with the teacher's greedy CER beside it.

use std::path::PathBuf;

use anyhow::Context;
use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use voxspec_eval::intelligibility::{
    INTELLIGIBILITY_DEFINITION, IntelligibilityReport, identify_clips, manifest_clips,
    read_candidates, read_dir_clips, score_clips_independently,
};
use voxspec_teacher::ctc::LengthNorm;

use crate::common::{DEFAULT_TEACHER, load_ctc_teacher};
use crate::progress::Bar;

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

pub fn run(cmd: EvalCommand) -> anyhow::Result<()> {
    match cmd {
        EvalCommand::Intelligibility(args) => intelligibility(args),
    }
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
        (Some(m), _) => (m.clone(), manifest_clips(m)?),
        (None, Some(d)) => (d.clone(), read_dir_clips(d)?),
        (None, None) => anyhow::bail!("pass --manifest FILE or --dir DIR"),
    };
    anyhow::ensure!(!clips.is_empty(), "{} has no clips", input.display());
    let device = voxspec_train::device::single()?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let (candidates_from, texts) = match &args.candidates {
        Some(path) => (path.display().to_string(), read_candidates(path)?),
        None => (
            "the clips' own transcripts".to_string(),
            clips.iter().map(|c| c.text.clone()).collect(),
        ),
    };
    let bar = Bar::new();
    let found = identify_clips(
        &teacher,
        &texts,
        &candidates_from,
        args.length_norm.into(),
        clips,
        args.batch,
        &bar,
    )?;
    let summary = &found.summary;
    println!(
        "teacher {}; {} clips from {}; {} candidates from {}",
        args.teacher.display(),
        summary.clips,
        input.display(),
        summary.candidates,
        candidates_from
    );
    print!("{}", found.table());
    let asr = match &asr_judge {
        Some(judge) => {
            let jobs = rayon::current_num_threads();
            let manifest = args.manifest.is_some();
            let score = score_clips_independently(judge, &input, manifest, &texts, jobs)?;
            println!(
                "\nindependent recogniser (tools/asr_judge.py, pocketsphinx en-us): forced choice \
                 {:.1} % ± {:.1} % ({} clips), open-vocabulary WER {} %, CER {:.1} %",
                100.0 * score.forced_choice,
                100.0 * score.forced_choice_se,
                score.clips,
                score.wer_text(),
                100.0 * score.cer
            );
            Some(score)
        }
        None => None,
    };
    print!("{}", found.misidentified(args.show));
    if let Some(out) = &args.out {
        let report = IntelligibilityReport {
            measure: INTELLIGIBILITY_DEFINITION,
            teacher: args.teacher.clone(),
            input,
            candidates_from,
            length_norm: found.length_norm,
            summary: found.summary,
            asr,
            clips: found.clips,
        };
        voxspec_eval::write_report(out, &report)
            .with_context(|| format!("writing {}", out.display()))?;
        println!("\nreport: {}", out.display());
    }
    Ok(())
}
