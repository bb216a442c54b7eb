//! `voxspec vocoder eval` (computed by `voxspec_eval::vocoder`): analysis–resynthesis quality of
//! a vocoder on a split of a prepared corpus against Griffin-Lim on the same log-mel — mel-cepstral distortion (all and voiced
//! frames), F0 and voicing errors, the CTC teacher's character error rate and forced-choice
//! sentence identification, the independent recogniser's WER and forced choice, real-time
//! factors, and optionally the three sets of clips as directories `voxspec eval
//! intelligibility --dir` reads.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use voxspec_codec::vocoder::PhaseRefinement;
use voxspec_eval::{EvalSplit, VocoderEvalSettings, evaluate_vocoder, write_report};
use voxspec_teacher::SemanticTeacher;

use crate::common::{DEFAULT_TEACHER, load_ctc_teacher, load_vocoder};
use crate::progress::Bar;

/// Resynthesis quality of a vocoder on one split of a prepared corpus, against Griffin-Lim.
///
/// Every utterance of <DATA>/<SPLIT>.jsonl (at most --max-utterances) is read at the vocoder's rate, its
/// log-mel (the vocoder's mel settings) is turned back into a waveform by the vocoder and by
/// 32 iterations of fast Griffin-Lim on the pseudo-inverted mel, both trimmed to the input
/// length. Reported: the mean mel-cepstral distortion (the MFCC-based MCD of `codec eval`:
/// c1..c13 of an 80-band log mel, 25 ms window, 10 ms hop, frames paired by index) of both
/// against the original; the CTC teacher's corpus CER and its forced-choice accuracy (the
/// own transcript must score highest among all transcripts of the split; chance = 1 / split
/// size) on original, vocoder and Griffin-Lim audio; on frames voiced in the original (YIN),
/// the MCD, the RMS F0 error in cents and the voicing error (where frame-rate buzz and wrong
/// harmonics show); the independent recogniser's WER and forced choice when it is set up
/// (tools/setup_judge.sh); and each method's real-time factor.
/// Prints a markdown table, writes a JSON report with per-utterance scores and, with
/// --audio-dir, <AUDIO_DIR>/{original,vocoder,griffin_lim}/<ID>.wav with <ID>.txt transcripts
/// beside them (the layout `voxspec eval intelligibility --dir` reads).
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Vocoder model directory (`voxspec vocoder train` output).
    #[arg(long, value_name = "DIR")]
    vocoder: PathBuf,
    /// Prepared data directory (`voxspec prepare` output).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Split whose manifest <DATA>/<SPLIT>.jsonl is evaluated.
    #[arg(long, default_value = "test")]
    split: String,
    /// Evaluate at most this many utterances (the first of the manifest).
    #[arg(long, value_name = "N")]
    max_utterances: Option<usize>,
    /// CTC teacher directory (`voxspec train ctc` output) for CER and forced choice.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_TEACHER)]
    teacher: PathBuf,
    /// Where to write the JSON report.
    #[arg(long, short, value_name = "FILE", default_value = "vocoder-eval.json")]
    out: PathBuf,
    /// Write every clip (16-bit WAV at the vocoder's rate, plus its transcript) into
    /// <AUDIO_DIR>/original, <AUDIO_DIR>/vocoder and <AUDIO_DIR>/griffin_lim.
    #[arg(long, value_name = "DIR")]
    audio_dir: Option<PathBuf>,
    /// Griffin-Lim iterations from the vocoder's predicted phase on the magnitude the log-mel
    /// stands for, which make the frames' phases agree (0: the vocoder's spectrum as it is;
    /// default: the vocoder's config.json, `phase_refinement`).
    #[arg(long, value_name = "N")]
    phase_refinement: Option<usize>,
    /// Iterations of the Griffin-Lim baseline.
    #[arg(long, value_name = "N", default_value_t = 32)]
    griffin_lim_iterations: usize,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.max_utterances != Some(0),
        "--max-utterances must be at least 1"
    );
    let device = voxspec_train::device::single()?;
    let mut vocoder = load_vocoder(&args.vocoder)?;
    if let Some(iterations) = args.phase_refinement {
        let momentum = vocoder.phase_refinement().momentum;
        vocoder = vocoder.with_phase_refinement(PhaseRefinement {
            iterations,
            momentum,
        })?;
    }
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let split = EvalSplit::read(&args.data, &args.split, args.max_utterances, &teacher)?;
    let config = vocoder.config().clone();
    let asr_judge = args.asr.judge()?;
    // The judge reads the clips from folders: --audio-dir, or a temporary one.
    let scratch = match (&asr_judge, &args.audio_dir) {
        (Some(_), None) => Some(tempfile::tempdir().context("making a temporary folder")?),
        _ => None,
    };
    let audio_dir: Option<PathBuf> = args
        .audio_dir
        .clone()
        .or_else(|| scratch.as_ref().map(|d| d.path().to_path_buf()));
    println!(
        "vocoder {}: {} mels, hop {} at {} Hz; teacher {} at {} Hz; {} {} utterances",
        args.vocoder.display(),
        config.n_mels,
        config.hop_length,
        config.sample_rate,
        args.teacher.display(),
        teacher.sample_rate(),
        split.utterances.len(),
        args.split
    );
    if let Some(judge) = &asr_judge {
        println!("independent recogniser: {}", judge.describe());
    }
    let settings = VocoderEvalSettings {
        vocoder_dir: &args.vocoder,
        teacher_dir: &args.teacher,
        audio_dir: audio_dir.as_deref(),
        judge: asr_judge.as_ref(),
        griffin_lim_iterations: args.griffin_lim_iterations,
    };
    let report = evaluate_vocoder(&vocoder, &teacher, &split, &settings, &Bar::new())?;
    print!("{}", report.markdown());
    write_report(&args.out, &report)?;
    if let Some(dir) = &args.audio_dir {
        println!(
            "\naudio: {}/{{original,vocoder,griffin_lim}} (score with `voxspec eval \
             intelligibility --dir <DIR> --candidates {}`)",
            dir.display(),
            report.manifest.display()
        );
    }
    println!("\nreport: {}", args.out.display());
    Ok(())
}
