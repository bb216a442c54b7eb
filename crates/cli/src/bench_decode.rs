//! `voxspec bench decode`: every decoder on the same test sentences in one run — speed (time
//! per token, speedup over AR measured alongside, tokens per forward, acceptance) and quality
//! proxies (CER, forced-choice sentence identification, NLL; see `voxspec_tts::run_decode_bench`,
//! which runs it). This module parses the settings and writes JSON, a markdown table like the
//! MTP paper's Tables I–II, and PNG plots like its Figs. 3–5 (TPT, CER and NLL over the number
//! of heads, with and without Viterbi).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use voxspec_teacher::CtcTeacher;
use voxspec_tts::{
    Baseline, BenchSettings, DecodeRow, DecoderGrid, DecoderParts, DecoderSpec, EngineKind, Judge,
    ModelPaths, Pipeline, RuleSpec, TtsError, load_draft, row_dir_name, run_decode_bench,
};

use crate::asr_judge::write_candidates;
use crate::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};
use crate::progress::Bar;
use crate::synth::{LengthArgs, ModelArgs, SamplingArgs, SplitArgs};

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
        let candidates = audio_dir.join("candidates.txt");
        write_candidates(
            &candidates,
            split_utterances.iter().map(|u| u.text.as_str()),
        )?;
        let jobs = rayon::current_num_threads();
        let baseline_label = args.baseline_engine.map(|e| format!("ar [{}]", e.name()));
        let total = report.rows.len() + usize::from(baseline_label.is_some());
        let rows = report.rows.iter_mut().chain(report.baseline.as_mut());
        for (i, row) in rows.enumerate() {
            let name = row_dir_name(&row.label);
            eprintln!(
                "independent recogniser: row {}/{total} ({})",
                i + 1,
                row.label
            );
            let score = asr.score_dir(
                &audio_dir.join(&name),
                &candidates,
                &audio_dir.join(format!("{name}.asr.json")),
                jobs,
            )?;
            row.asr = Some(score);
        }
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
    let table = markdown(rows, baseline_row, costs, utterances.len(), chance);
    let md_path = out_dir.join("bench-decode.md");
    voxspec_data::write_atomic(&md_path, table.as_bytes())
        .with_context(|| format!("writing {}", md_path.display()))?;
    let plots = write_plots(&out_dir, rows, judge.is_some())?;
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

/// Figures like the MTP paper's Figs. 3–5 — TPT, CER and NLL over the number of heads, one line
/// without Viterbi and one per Viterbi top_k (AR is the k = 1 point of each) — and, with
/// speculative rows, speedup over γ per acceptance rule. Returns how many were written.
fn write_plots(dir: &std::path::Path, rows: &[DecodeRow], cer: bool) -> anyhow::Result<usize> {
    let ar = &rows[0];
    let mut top_ks: Vec<usize> = rows
        .iter()
        .filter_map(|r| match r.spec {
            DecoderSpec::MtpViterbi { top_k, .. } => Some(top_k),
            _ => None,
        })
        .collect();
    top_ks.sort_unstable();
    top_ks.dedup();
    let over_heads = |metric: &dyn Fn(&DecodeRow) -> Option<f64>| -> Vec<Series> {
        let start = metric(ar).map(|y| (1.0, y));
        let mut plain: Vec<(f64, f64)> = start.into_iter().collect();
        for r in rows {
            if let (DecoderSpec::Mtp { heads }, Some(y)) = (&r.spec, metric(r)) {
                plain.push((*heads as f64, y));
            }
        }
        let mut series = vec![Series {
            label: "w/o Viterbi".into(),
            points: plain,
        }];
        for &k in &top_ks {
            let mut points: Vec<(f64, f64)> = start.into_iter().collect();
            for r in rows {
                if let (DecoderSpec::MtpViterbi { heads, top_k }, Some(y)) = (&r.spec, metric(r))
                    && *top_k == k
                {
                    points.push((*heads as f64, y));
                }
            }
            series.push(Series {
                label: format!("w/ Viterbi, top_k={k}"),
                points,
            });
        }
        series
    };
    let mut written = 0;
    let mut figure = |name: &str, title: &str, y_label: &str, series: Vec<Series>| {
        let series: Vec<Series> = series.into_iter().filter(|s| s.points.len() > 1).collect();
        if series.is_empty() {
            return Ok::<(), anyhow::Error>(());
        }
        write_line_plot(
            &dir.join(name),
            &LinePlot {
                title,
                x_label: "MTP heads k",
                y_label,
                series: &series,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        written += 1;
        Ok(())
    };
    figure(
        "tpt.png",
        "Time per token over the number of heads",
        "TPT (ms/token)",
        over_heads(&|r| Some(r.tpt_ms)),
    )?;
    if cer {
        figure(
            "cer.png",
            "CER of the synthesised speech (CTC teacher)",
            "CER (%)",
            over_heads(&|r| r.cer.map(|c| 100.0 * c)),
        )?;
    }
    figure(
        "nll.png",
        "Target NLL of the generated codes",
        "NLL (nats/token)",
        over_heads(&|r| r.nll),
    )?;

    // Speculative rows: speedup over γ, one line per drafter and rule.
    let mut lines: Vec<Series> = Vec::new();
    for r in rows {
        let (prefix, rule, gamma) = match &r.spec {
            DecoderSpec::Speculative { rule, gamma } => ("draft", rule, *gamma),
            DecoderSpec::SelfSpec { rule, gamma } => ("self", rule, *gamma),
            _ => continue,
        };
        let label = match rule {
            RuleSpec::Sd => format!("{prefix} sd"),
            RuleSpec::Ssd { beta } => format!("{prefix} ssd β={beta}"),
            RuleSpec::Pcg { theta } => format!("{prefix} pcg θ={theta:.3}"),
        };
        match lines.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((gamma as f64, r.speedup)),
            None => lines.push(Series {
                label,
                points: vec![(gamma as f64, r.speedup)],
            }),
        }
    }
    if !lines.is_empty() {
        let lines: Vec<Series> = lines.into_iter().filter(|s| !s.points.is_empty()).collect();
        write_line_plot(
            &dir.join("speculative.png"),
            &LinePlot {
                title: "Speculative decoding: speedup over AR (same run)",
                x_label: "draft length γ",
                y_label: "speedup (x)",
                series: &lines,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        written += 1;
    }
    Ok(written)
}

/// AR's speed-up over the baseline engine's AR: the inverse of the baseline row's `speedup`.
fn ar_over_baseline(baseline: &DecodeRow) -> f64 {
    if baseline.speedup > 0.0 {
        1.0 / baseline.speedup
    } else {
        0.0
    }
}

fn fmt_opt(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{:.*}", digits, v * scale))
}

/// The markdown report: the decoder table, the forced-choice chance line (`chance` = number
/// of candidates and 1 / that, when a teacher scored) and the forward-cost line.
/// The markdown table, AR first and the baseline engine's AR (with the engine the rows ran on)
/// right after it.
fn markdown(
    rows: &[DecodeRow],
    baseline: Option<(&DecodeRow, &str)>,
    costs: &[f64],
    utterances: usize,
    chance: Option<(usize, f64)>,
) -> String {
    let cer = chance.is_some();
    let asr = rows.iter().any(|r| r.asr.is_some());
    let mut s = String::from(
        "| decoder | TPT (ms) | speedup | tokens/forward | acceptance | CER (%) | ID (%) | NLL \
         | EOS stops |",
    );
    s.push_str(if asr {
        " WER, ASR (%) | ID, ASR (%) |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|---|---|\n"
    });
    let ordered = rows
        .iter()
        .take(1)
        .chain(baseline.map(|(b, _)| b))
        .chain(rows.iter().skip(1));
    for r in ordered {
        s.push_str(&format!(
            "| {} | {:.2} | {:.2}x | {:.2} | {} | {} | {} | {} | {}/{} |",
            r.label,
            r.tpt_ms,
            r.speedup,
            r.tokens_per_forward,
            fmt_opt(r.acceptance_rate, 1.0, 3),
            if cer {
                fmt_opt(r.cer, 100.0, 1)
            } else {
                "–".into()
            },
            fmt_opt(r.forced_choice, 100.0, 1),
            fmt_opt(r.nll, 1.0, 3),
            r.eos_stops,
            r.utterances
        ));
        if asr {
            match &r.asr {
                Some(a) => s.push_str(&format!(
                    " {:.1} | {:.1} ± {:.1} |",
                    100.0 * a.wer,
                    100.0 * a.forced_choice,
                    100.0 * a.forced_choice_se
                )),
                None => s.push_str(" – | – |"),
            }
        }
        s.push('\n');
    }
    let rel: Vec<String> = costs
        .iter()
        .enumerate()
        .map(|(i, c)| format!("k={}: {:.2}", i + 1, c / costs[0]))
        .collect();
    if let (Some((b, engine)), Some(ar)) = (baseline, rows.first()) {
        s.push_str(&format!(
            "\nAR on {engine}: {:.3} ms per token, {:.2}x the speed of `{}` ({:.3} ms), every \
             sentence decoded by both in this run.\n",
            ar.tpt_ms,
            ar_over_baseline(b),
            b.label,
            b.tpt_ms
        ));
    }
    if let Some((n, p)) = chance {
        s.push_str(&format!(
            "\nID: forced-choice sentence identification by the CTC teacher among all {n} \
             transcripts of the split; chance = 1/{n} = {:.1} %.\n",
            100.0 * p
        ));
    }
    if asr {
        s.push_str(
            "\nWER, ASR / ID, ASR: the independent recogniser (tools/asr_judge.py: pocketsphinx's \
             en-us model, never trained on this corpus), open-vocabulary word error rate and \
             forced choice among the same transcripts (± one binomial standard error).\n",
        );
    }
    s.push_str(&format!(
        "\n{utterances} utterances. Forward cost over k new tokens relative to k = 1 on this \
         model and backend: {}.\n",
        rel.join(", ")
    ));
    s
}
