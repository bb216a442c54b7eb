//! `voxspec bench decode`: every decoder on the same test sentences in one run — speed (time
//! per token, speedup over AR measured alongside, tokens per forward, acceptance) and quality
//! proxies (CER, forced-choice sentence identification, NLL). `voxspec_eval::bench_decode`
//! runs it; `voxspec_eval::decode_report` writes JSON, a markdown table like the MTP paper's
//! Tables I–II, and PNG plots like its Figs. 3–5 (TPT, CER and NLL over the number of heads,
//! with and without Viterbi). This module turns the flags into its settings.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use voxspec_eval::bench_decode::{DecodeBenchHooks, DecodeBenchSetup, run_decode_benchmark};
use voxspec_eval::decode_report::write_decode_bench;
use voxspec_teacher::CtcTeacher;
use voxspec_tts::{DecoderGrid, EngineKind, TtsError};

use crate::progress::Bar;
use crate::synth_args::{LengthArgs, ModelArgs, SamplingArgs, SplitArgs};

/// Decoders side by side on a split's sentences (their transcripts as text).
#[derive(Debug, Args)]
pub struct DecodeBenchArgs {
    #[command(flatten)]
    models: ModelArgs,
    #[command(flatten)]
    sentences: SplitArgs,
    /// Use at most this many utterances.
    #[arg(long, default_value_t = 10)]
    max_utterances: usize,
    /// CTC teacher that transcribes the synthesised audio for CER and identifies its sentence
    /// among every transcript of the split (forced choice, chance = 1 / split size)
    /// [default: checkpoints/ctc-minitts].
    #[arg(long, value_name = "DIR")]
    teacher: Option<PathBuf>,
    /// Skip the CER and forced-choice columns (no teacher needed).
    #[arg(long)]
    no_cer: bool,
    /// MTP head counts k (k = 1 is the AR baseline).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    heads: Vec<usize>,
    /// Viterbi candidates per head (one row per value and k ≥ 2); `--top-k` with no value: no
    /// Viterbi rows.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "3,5,9,15")]
    top_k: Vec<usize>,
    /// Draft model (`voxspec train draft`): adds speculative rows (exact, SSD, PCG).
    #[arg(long, value_name = "DIR")]
    draft: Option<PathBuf>,
    /// Self-speculative rows: the AR model's own MTP heads draft (exact, SSD, PCG).
    #[arg(long)]
    self_spec: bool,
    /// Draft lengths γ of the speculative rows.
    #[arg(long, value_delimiter = ',', default_value = "2,3,4")]
    gammas: Vec<usize>,
    /// SSD tolerances; 0 is exact speculative sampling.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.4")]
    betas: Vec<f32>,
    /// PCG similarity thresholds θ (groups built from the AR model's code embeddings).
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    thetas: Vec<f32>,
    /// PCG rows whose θ is chosen so that the groups have these mean sizes (a fixed θ does not
    /// carry over between models) [default without --thetas: 4.5,10.3, the paper's ablation].
    #[arg(long, value_delimiter = ',')]
    group_sizes: Option<Vec<f64>>,
    /// No PCG rows.
    #[arg(long)]
    no_pcg: bool,
    /// Seed of the first utterance (utterance i uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    lengths: LengthArgs,
    /// Output directory: bench-decode.json, bench-decode.md and the PNG plots
    /// [default: <EXP>/bench].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also decode every sentence with AR on this engine (e.g. `burn` beside a native engine),
    /// right before the decoders: the engines' AR compared in the same run, sentence by
    /// sentence (row `ar [ENGINE]`, and the AR's speed-up over it)
    #[arg(long, value_enum, value_name = "ENGINE")]
    baseline_engine: Option<EngineKind>,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
    /// Keep every decoder's clips in <OUT>/audio/<row>/ (always done when the independent
    /// recogniser runs).
    #[arg(long)]
    keep_audio: bool,
}

pub fn run(args: DecodeBenchArgs) -> anyhow::Result<()> {
    let grid = DecoderGrid {
        heads: args.heads.clone(),
        top_k: args.top_k.clone(),
        gammas: args.gammas.clone(),
        betas: args.betas.clone(),
        thetas: if args.no_pcg {
            Vec::new()
        } else {
            args.thetas.clone()
        },
        group_sizes: match &args.group_sizes {
            _ if args.no_pcg => Vec::new(),
            Some(sizes) => sizes.clone(),
            // The paper's ablation sizes, unless fixed thresholds were asked for instead.
            None if args.thetas.is_empty() => vec![4.5, 10.3],
            None => Vec::new(),
        },
        draft: args.draft.is_some(),
        self_spec: args.self_spec,
    };
    // The grid's fields are named like the flags.
    if let Err(TtsError::Bench { what, reason }) = grid.validate() {
        bail!("--{what}: {reason}");
    }
    let device = voxspec_train::device::single()?;
    let sampler = args.sampling.config(1.0)?;
    let paths = args.models.paths();
    if args.baseline_engine == Some(paths.engine) {
        bail!(
            "--baseline-engine {} is the engine the benchmark runs on (--engine); name another",
            paths.engine.name()
        );
    }
    let (manifest, split_utterances) = args.sentences.read(&args.models.exp)?;
    let teacher = if args.no_cer {
        None
    } else {
        let dir = args
            .teacher
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::common::DEFAULT_TEACHER));
        Some(CtcTeacher::load(&dir, &device).with_context(|| {
            format!(
                "loading the CTC teacher {} (or pass --no-cer)",
                dir.display()
            )
        })?)
    };
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| args.models.exp.join("bench"));
    let asr = args.asr.judge()?;
    let setup = DecodeBenchSetup {
        grid,
        paths,
        transition_weight: args.models.transition_weight,
        draft: args.draft.clone(),
        baseline_engine: args.baseline_engine,
        split: &args.sentences.split,
        manifest: &manifest,
        split_utterances: &split_utterances,
        max_utterances: args.max_utterances,
        teacher: teacher.as_ref(),
        asr: asr.as_ref(),
        sampler,
        lengths: args.lengths.lengths(),
        seed: args.seed,
        audio_dir: out_dir.join("audio"),
        keep_audio: args.keep_audio,
    };
    let hooks = DecodeBenchHooks {
        progress: &Bar::new(),
        on_groups: &mut |g| crate::groups::report(g),
        on_row: &mut |i, total, label| {
            eprintln!("independent recogniser: row {}/{total} ({label})", i + 1);
        },
    };
    let report = run_decode_benchmark(&setup, &device, hooks)?;
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let files = write_decode_bench(&out_dir, &report)?;
    println!("{}", files.table);
    eprintln!(
        "wrote {}, {} and {} plots in {}",
        files.json.display(),
        files.markdown.display(),
        files.plots,
        out_dir.display()
    );
    Ok(())
}
