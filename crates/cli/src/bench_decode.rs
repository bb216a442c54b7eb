//! `voxspec bench decode`: every decoder on the same test sentences in one run — speed (time
//! per token, speedup over AR measured alongside, tokens per forward, acceptance) and quality
//! proxies (CER, forced-choice sentence identification, NLL; see `voxspec_tts::run_decode_bench`,
//! which runs it). This module parses the settings and writes JSON, a markdown table like the
//! MTP paper's Tables I–II, and PNG plots like its Figs. 3–5 (TPT, CER and NLL over the number
//! of heads, with and without Viterbi).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use voxspec_eval::{ar_over_baseline, decode_markdown, score_decode_rows, write_decode_plots};
use voxspec_teacher::CtcTeacher;
use voxspec_tts::{
    Baseline, BenchSettings, DecoderGrid, DecoderParts, EngineKind, Judge, ModelPaths, Pipeline,
    TtsError, load_draft, run_decode_bench,
};

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
    let device = crate::device::single()?;
    let sampler = args.sampling.config(1.0)?;
    let paths = args.models.paths();
    if args.baseline_engine == Some(paths.engine) {
        bail!(
            "--baseline-engine {} is the engine the benchmark runs on (--engine); name another",
            paths.engine.name()
        );
    }
    let pipeline = Pipeline::load(&paths, &device)?;
    let baseline_pipeline = match args.baseline_engine {
        Some(engine) => Some((
            Pipeline::load(
                &ModelPaths {
                    engine,
                    ..paths.clone()
                },
                &device,
            )
            .with_context(|| {
                format!(
                    "loading the models on the baseline engine {}",
                    engine.name()
                )
            })?,
            engine,
        )),
        None => None,
    };
    let (manifest, split_utterances) = args.sentences.read(&args.models.exp)?;
    let utterances: Vec<_> = split_utterances
        .iter()
        .take(args.max_utterances)
        .cloned()
        .collect();
    if utterances.is_empty() {
        bail!("{} has no utterances", manifest.display());
    }
    let teacher = if args.no_cer {
        None
    } else {
        let dir = args
            .teacher
            .clone()
            .unwrap_or_else(|| PathBuf::from("checkpoints/ctc-minitts"));
        Some(CtcTeacher::load(&dir, &device).with_context(|| {
            format!(
                "loading the CTC teacher {} (or pass --no-cer)",
                dir.display()
            )
        })?)
    };
    // Forced choice among every transcript of the split, not only the synthesised ones.
    let judge = match &teacher {
        Some(t) => Some(
            Judge::new(t, split_utterances.iter().map(|u| u.text.as_str()))
                .with_context(|| format!("the candidate sentences of {}", manifest.display()))?,
        ),
        None => None,
    };

    let mut parts = DecoderParts::default();
    if grid.needs_transitions() {
        parts.load_transitions(&paths.transitions, args.models.transition_weight)?;
    }
    if let Some(dir) = &args.draft {
        parts.draft = Some(load_draft(dir, &pipeline.ar, paths.engine, &device)?);
    }
    let (specs, groups) = grid.specs(&pipeline.ar, &mut parts)?;
    for g in &groups {
        crate::groups::report(g);
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| args.models.exp.join("bench"));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let asr = args.asr.judge()?;
    let audio_dir = out_dir.join("audio");
    let settings = BenchSettings {
        sampler,
        lengths: args.lengths.lengths(),
        seed: args.seed,
        audio_dir: (asr.is_some() || args.keep_audio).then(|| audio_dir.clone()),
    };
    let baseline = baseline_pipeline
        .as_ref()
        .map(|(pipeline, engine)| Baseline {
            pipeline,
            engine: engine.name(),
        });
    let mut report = run_decode_bench(
        &pipeline,
        &specs,
        &parts,
        &utterances,
        judge.as_ref(),
        baseline,
        &settings,
        &Bar::new(),
    )?;
    if let Some(asr) = &asr {
        let mut on_row = |i: usize, total: usize, label: &str| {
            eprintln!("independent recogniser: row {}/{total} ({label})", i + 1);
        };
        score_decode_rows(
            asr,
            &mut report,
            &audio_dir,
            split_utterances.iter().map(|u| u.text.as_str()),
            rayon::current_num_threads(),
            &mut on_row,
        )?;
    }
    let (rows, costs) = (&report.rows, &report.forward_costs);
    let json = serde_json::json!({
        "benchmark": "decode",
        "split": args.sentences.split,
        "utterances": utterances.len(),
        "threads": rayon::current_num_threads(),
        "engine": paths.engine,
        "sampler": {
            "temperature": sampler.temperature,
            "top_k": sampler.top_k,
            "top_p": sampler.top_p,
        },
        "models": {
            "ar": paths.ar,
            "nar": paths.nar,
            "codec": paths.codec,
            "draft": args.draft,
        },
        "forward_cost": costs.iter().enumerate().map(|(i, c)| serde_json::json!({
            "k": i + 1, "median_ms": c, "relative_to_k1": c / costs[0],
        })).collect::<Vec<_>>(),
        "forced_choice": judge.as_ref().map(|j| serde_json::json!({
            "candidates": j.candidates(),
            "chance": j.chance(),
            "length_norm": j.length_norm(),
        })),
        "asr_judge": asr.as_ref().map(|a| serde_json::json!({
            "tool": "tools/asr_judge.py (pocketsphinx en-us, a fresh decoder per clip)",
            "found": a.describe(),
            "candidates": split_utterances.len(),
        })),
        "rows": rows,
        "baseline": report.baseline.as_ref().map(|b| serde_json::json!({
            "engine": args.baseline_engine.map(EngineKind::name),
            "row": b,
            "ar_speedup_over_baseline": ar_over_baseline(b),
        })),
    });
    let json_path = out_dir.join("bench-decode.json");
    voxspec_data::write_atomic(&json_path, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("writing {}", json_path.display()))?;
    let chance = judge.as_ref().map(|j| (j.candidates(), j.chance()));
    let baseline_row = report.baseline.as_ref().map(|b| (b, paths.engine.name()));
    let table = decode_markdown(rows, baseline_row, costs, utterances.len(), chance);
    let md_path = out_dir.join("bench-decode.md");
    voxspec_data::write_atomic(&md_path, table.as_bytes())
        .with_context(|| format!("writing {}", md_path.display()))?;
    let plots = write_decode_plots(&out_dir, rows, judge.is_some())?;
    println!("{table}");
    eprintln!(
        "wrote {}, {} and {} plots in {}",
        json_path.display(),
        md_path.display(),
        plots,
        out_dir.display()
    );
    Ok(())
}
