//! `voxspec bench multistream`: the delayed multi-stream LM's frame decoders on a split's
//! sentences in one run — LM real-time factor, time per frame, frames per target forward,
//! acceptance — and the quality of the audio by the CTC teacher (CER, forced-choice sentence
//! identification) and, when it is set up, the independent recogniser (WER, forced choice);
//! optionally the single-stream AR model of the main job on the same
//! sentences in the same run, so the LM real-time factors compare.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use voxspec_eval::bench_multistream::{
    MultiStreamBenchHooks, MultiStreamBenchSetup, MultiStreamGrid, SingleStreamBaseline,
    run_multistream_benchmark, write_multistream_bench,
};
use voxspec_teacher::CtcTeacher;
use voxspec_tts::{EngineKind, MultiStreamPaths};

use crate::progress::Bar;
use crate::synth_args::{SamplingArgs, SplitArgs};

/// Multi-stream LM decoders side by side on a split's sentences (their transcripts as text).
#[derive(Debug, Args)]
pub struct MultiStreamBenchArgs {
    /// The multi-stream LM (`voxspec train multistream`).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// A draft (`voxspec train multistream --target`): adds speculative rows.
    #[arg(long, value_name = "DIR")]
    draft: Option<PathBuf>,
    /// Recording whose voice every sentence is spoken with.
    #[arg(long, value_name = "WAV")]
    reference: PathBuf,
    /// The codec [default: the one the LM was trained on].
    #[arg(long, value_name = "DIR")]
    codec: Option<PathBuf>,
    #[command(flatten)]
    vocoding: crate::synth_args::VocoderArgs,
    /// Implementation that runs the LM and the draft: the native CPU engine (f32 or bf16
    /// weights) or Burn.
    #[arg(long, value_enum, default_value_t = EngineKind::Native)]
    engine: EngineKind,
    #[command(flatten)]
    sentences: SplitArgs,
    /// Use at most this many utterances.
    #[arg(long, default_value_t = 60)]
    max_utterances: usize,
    /// CTC teacher of the CER and forced-choice columns [default: checkpoints/ctc-minitts].
    #[arg(long, value_name = "DIR")]
    teacher: Option<PathBuf>,
    /// Draft lengths γ of the speculative rows.
    #[arg(long, value_delimiter = ',', default_value = "2,3")]
    gammas: Vec<usize>,
    /// Acceptance tolerances of the speculative rows (0: exact speculative sampling, > 0: SSD).
    #[arg(long, value_delimiter = ',', default_value = "0,0.4")]
    betas: Vec<f32>,
    /// Also PCG rows (with --draft): group acceptance with each stream's own similarity
    /// groups (mean size 4.5), one row per γ.
    #[arg(long)]
    pcg: bool,
    /// Steps per forward of the MTP rows (independent and Viterbi), for a model trained with
    /// `--mtp-heads` [default: all its heads; none without].
    #[arg(long, value_delimiter = ',')]
    heads: Vec<usize>,
    /// Candidates per head of the MTP Viterbi rows.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Repetition penalty of the sampler (the SoCodec paper samples with 2.0).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    /// Also run the single-stream AR model of this train_mtp.sh experiment (its AR decoder) on
    /// the same sentences, for the LM real-time factor and quality side by side.
    #[arg(long, value_name = "DIR")]
    baseline_exp: Option<PathBuf>,
    /// The baseline's AR model directory [default: <BASELINE_EXP>/ar].
    #[arg(long, value_name = "DIR", requires = "baseline_exp")]
    baseline_model: Option<PathBuf>,
    /// Seed of the first utterance (utterance i uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
    /// Output directory: bench-multistream.json and bench-multistream.md (and, for the
    /// independent recogniser, the clips under audio/<row>/).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: MultiStreamBenchArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let mut sampler = args.sampling.config(1.0)?;
    sampler.repetition_penalty = args.repetition_penalty;
    sampler.validate()?;
    let exp = args.baseline_exp.clone().unwrap_or_default();
    let (manifest, all) = args.sentences.read(&exp)?;
    let teacher_dir = args
        .teacher
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::common::DEFAULT_TEACHER));
    let teacher = CtcTeacher::load(&teacher_dir, &device)
        .with_context(|| format!("loading the CTC teacher {}", teacher_dir.display()))?;
    let asr = args.asr.judge()?;
    let setup = MultiStreamBenchSetup {
        paths: MultiStreamPaths {
            model: args.model.clone(),
            codec: args.codec.clone(),
            vocoder: args.vocoding.vocoder(),
            engine: args.engine,
        },
        draft: args.draft.clone(),
        reference: args.reference.clone(),
        grid: MultiStreamGrid {
            gammas: args.gammas.clone(),
            betas: args.betas.clone(),
            pcg: args.pcg,
            heads: args.heads.clone(),
            top_k: args.top_k,
        },
        split: &args.sentences.split,
        manifest: &manifest,
        split_utterances: &all,
        max_utterances: args.max_utterances,
        teacher: &teacher,
        asr: asr.as_ref(),
        sampler,
        seed: args.seed,
        baseline: args.baseline_exp.clone().map(|exp| SingleStreamBaseline {
            exp,
            model: args.baseline_model.clone(),
        }),
        audio_dir: args.out.join("audio"),
    };
    let hooks = MultiStreamBenchHooks {
        progress: &Bar::new(),
        baseline_progress: &Bar::new(),
        on_row: &mut |i, total, label| {
            eprintln!("independent recogniser: row {}/{total} ({label})", i + 1);
        },
    };
    let report = run_multistream_benchmark(&setup, &device, hooks)?;
    let (json, md_path, md) = write_multistream_bench(&args.out, &report)?;
    println!("{md}");
    eprintln!("wrote {} and {}", json.display(), md_path.display());
    Ok(())
}
