//! `voxspec bench decode`: every decoder on the same test sentences in one run — speed (time
//! per token, speedup over AR measured alongside, tokens per forward, acceptance) and quality
//! proxies (CER of the synthesised audio by the CTC teacher, forced-choice sentence
//! identification among every transcript of the split by the same teacher, the target's NLL of
//! the generated codes). Writes JSON, a markdown table like the MTP paper's Tables I–II, and PNG plots like its
//! Figs. 3–5 (TPT, CER and NLL over the number of heads, with and without Viterbi).
//!
//! Utterances are the outer loop and decoders the inner one, so a change in machine load during
//! the run hits every decoder alike; each decoder sees the same seed per utterance.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use voxspec_data::{Progress, read_manifest};
use voxspec_infer::{
    DecodeStats, SequenceNll, SimilarityGroups, StopReason, Transitions, groups_of_mean_size,
    sequence_nll,
};
use voxspec_teacher::ctc::{ForcedChoice, LengthNorm};
use voxspec_teacher::{CtcTeacher, ErrorCounts, SemanticTeacher};

use crate::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};
use crate::progress::Bar;
use crate::synth::{
    DecoderParts, DecoderSpec, LengthArgs, ModelArgs, Pipeline, RuleSpec, SamplingArgs,
};
use voxspec_mtp::forward_costs;

/// Decoders side by side on a split's sentences (their transcripts as text).
#[derive(Debug, Args)]
pub struct DecodeBenchArgs {
    #[command(flatten)]
    models: ModelArgs,
    /// Prepared data directory with <SPLIT>.jsonl [default: <EXP>/data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// Split whose transcripts are synthesised.
    #[arg(long, default_value = "test")]
    split: String,
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
    /// Viterbi candidates per head (one row per value and k ≥ 2); empty: no Viterbi rows.
    #[arg(long, value_delimiter = ',', default_value = "3,5,9,15")]
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
}

/// Totals of one decoder over the utterances.
#[derive(Debug, Default, Clone)]
struct Tally {
    utterances: usize,
    tokens: usize,
    ar_seconds: f64,
    audio_seconds: f64,
    stats: DecodeStats,
    eos_stops: usize,
    errors: ErrorCounts,
    /// Utterances whose sentence the teacher picked out of the split's transcripts.
    identified: usize,
    nll: SequenceNll,
}

#[derive(Debug, Serialize)]
struct Row {
    #[serde(flatten)]
    spec: DecoderSpec,
    label: String,
    utterances: usize,
    tokens: usize,
    /// Time per token of the AR stage, ms.
    tpt_ms: f64,
    /// AR TPT divided by this TPT (same run).
    speedup: f64,
    /// AR-stage wall time / audio duration.
    lm_rtf: f64,
    /// Emitted tokens (end of speech included) per target forward (prefill included): 1 for
    /// AR.
    tokens_per_forward: f64,
    target_forwards: usize,
    draft_forwards: usize,
    acceptance_rate: Option<f64>,
    thinning_trials: usize,
    /// Sequences that ended at end of speech (the rest hit the length limit).
    eos_stops: usize,
    cer: Option<f64>,
    /// Forced-choice accuracy: the fraction of utterances whose own sentence has the highest
    /// CTC likelihood among all transcripts of the split (chance: 1 / split size).
    forced_choice: Option<f64>,
    nll: Option<f64>,
}

pub fn run(args: DecodeBenchArgs) -> anyhow::Result<()> {
    if args.heads.is_empty() || args.heads.contains(&0) {
        bail!("--heads needs values of at least 1");
    }
    if args.top_k.contains(&0) {
        bail!("--top-k values must be at least 1");
    }
    if args.gammas.contains(&0) {
        bail!("--gammas values must be at least 1 (γ = 0 drafts nothing)");
    }
    if let Some(t) = args.thetas.iter().find(|t| !(**t > -1.0 && **t < 1.0)) {
        bail!("--thetas: θ = {t} is outside (−1, 1)");
    }
    if let Some(b) = args.betas.iter().find(|b| !(b.is_finite() && **b >= 0.0)) {
        bail!("--betas: β = {b} must be finite and at least 0");
    }
    let device = crate::device::single()?;
    let sampler = args.sampling.config()?;
    let pipeline = Pipeline::load(&args.models, &device)?;
    let data = args
        .data
        .clone()
        .unwrap_or_else(|| args.models.exp.join("data"));
    let manifest = data.join(format!("{}.jsonl", args.split));
    let split_utterances =
        read_manifest(&manifest).with_context(|| format!("reading the {} manifest", args.split))?;
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
    let choice = match &teacher {
        Some(t) => {
            let set = ForcedChoice::new(
                t.tokenizer(),
                split_utterances.iter().map(|u| u.text.as_str()),
                LengthNorm::default(),
            )
            .with_context(|| format!("the candidate sentences of {}", manifest.display()))?;
            let own = utterances
                .iter()
                .map(|u| {
                    set.position(t.tokenizer(), &u.text)?
                        .with_context(|| format!("utterance {} is not a candidate", u.id))
                })
                .collect::<anyhow::Result<Vec<usize>>>()?;
            Some((set, own))
        }
        None => None,
    };

    // The decoders.
    let mut parts = DecoderParts::default();
    let mut specs = vec![DecoderSpec::Ar];
    for &k in args.heads.iter().filter(|&&k| k > 1) {
        specs.push(DecoderSpec::Mtp { heads: k });
    }
    let viterbi = args.heads.iter().any(|&k| k > 1) && !args.top_k.is_empty();
    if viterbi {
        let path = args.models.transitions_file();
        parts.transitions =
            Some(Arc::new(Transitions::load(&path).with_context(|| {
                format!("loading the transition matrix {}", path.display())
            })?));
        for &k in args.heads.iter().filter(|&&k| k > 1) {
            for &top_k in &args.top_k {
                specs.push(DecoderSpec::MtpViterbi { heads: k, top_k });
            }
        }
    }
    let speculative = args.draft.is_some() || args.self_spec;
    if speculative {
        let mut rules: Vec<RuleSpec> = args
            .betas
            .iter()
            .map(|&beta| {
                if beta == 0.0 {
                    RuleSpec::Sd
                } else {
                    RuleSpec::Ssd { beta }
                }
            })
            .collect();
        if !args.no_pcg {
            let (table, vocab, dim) = pipeline.ar.code_embeddings()?;
            let mut built = Vec::new();
            for &theta in &args.thetas {
                built.push(SimilarityGroups::from_embeddings(
                    &table, vocab, dim, theta,
                )?);
            }
            let sizes = match (&args.group_sizes, args.thetas.is_empty()) {
                (Some(sizes), _) => sizes.clone(),
                (None, true) => vec![4.5, 10.3],
                (None, false) => Vec::new(),
            };
            for &size in &sizes {
                built.push(groups_of_mean_size(&table, vocab, dim, size)?);
            }
            for groups in built {
                let theta = groups.theta();
                crate::groups::report(&groups);
                if parts.groups.iter().all(|(t, _)| *t != theta) {
                    parts.groups.push((theta, Arc::new(groups)));
                    rules.push(RuleSpec::Pcg { theta });
                }
            }
        }
        if let Some(dir) = &args.draft {
            let draft = crate::synth::load_draft(dir, &pipeline.ar, args.models.engine, &device)?;
            parts.draft = Some(draft);
            for &gamma in &args.gammas {
                for rule in &rules {
                    specs.push(DecoderSpec::Speculative {
                        rule: rule.clone(),
                        gamma,
                    });
                }
            }
        }
        if args.self_spec {
            for &gamma in &args.gammas {
                for rule in &rules {
                    specs.push(DecoderSpec::SelfSpec {
                        rule: rule.clone(),
                        gamma,
                    });
                }
            }
        }
    }
    let mut decoders = specs
        .iter()
        .map(|s| parts.build(s, &pipeline.lm))
        .collect::<anyhow::Result<Vec<_>>>()?;

    // The run: utterances outer, decoders inner.
    let mut tallies = vec![Tally::default(); specs.len()];
    let rate = pipeline.sample_rate();
    let bar = Bar::with_len(
        (utterances.len() * specs.len()) as u64,
        "decoding (utterances × decoders)",
    );
    for (i, u) in utterances.iter().enumerate() {
        let text = pipeline
            .text_ids(&u.text)
            .with_context(|| format!("utterance {}", u.id))?;
        let request = pipeline.request(&text, None, &args.lengths, args.seed + i as u64)?;
        let reference = match &teacher {
            Some(t) => Some(t.normalize(&u.text)?),
            None => None,
        };
        for (tally, decoder) in tallies.iter_mut().zip(decoders.iter_mut()) {
            let out = pipeline.synthesize(decoder.as_mut(), &request, &text, None, &sampler)?;
            let g = &out.generation;
            tally.utterances += 1;
            tally.tokens += g.tokens.len();
            tally.ar_seconds += out.ar_seconds;
            tally.audio_seconds += out.samples.len() as f64 / f64::from(rate);
            tally.stats.merge(&g.stats);
            let eos = g.stop == StopReason::Eos;
            tally.eos_stops += usize::from(eos);
            tally
                .nll
                .merge(sequence_nll(&pipeline.ar, &request.prompt, &g.tokens, eos)?);
            if let (Some(t), Some(reference), Some((set, own))) = (&teacher, &reference, &choice) {
                if out.samples.len() < pipeline.codec_config.hop_length() {
                    // Nothing to hear: every character deleted, the sentence not identified.
                    tally.errors += ErrorCounts::between("", reference);
                } else {
                    let resampled;
                    let wave = if t.sample_rate() == rate {
                        &out.samples
                    } else {
                        resampled = voxspec_audio::resample(&out.samples, rate, t.sample_rate())?;
                        &resampled
                    };
                    let verdict = t
                        .forced_choice(set, &[wave.as_slice()], &[own[i]])?
                        .pop()
                        .context("no verdict for one clip")?;
                    tally.errors += verdict.errors;
                    tally.identified += usize::from(verdict.choice.identified);
                }
            }
            bar.inc(1);
        }
    }
    bar.finish();

    // Cost of a forward over k new tokens relative to one, on this model.
    let mut max_k = args.heads.iter().copied().max().unwrap_or(1);
    if speculative {
        max_k = max_k.max(args.gammas.iter().map(|g| g + 1).max().unwrap_or(1));
    }
    let costs = forward_costs(&pipeline.lm, pipeline.ar.is_aligned(), 96, max_k, 10)?;

    let ar_tpt = tpt_ms(&tallies[0]);
    let rows: Vec<Row> = specs
        .iter()
        .zip(&tallies)
        .map(|(spec, t)| {
            let tpt = tpt_ms(t);
            Row {
                spec: spec.clone(),
                label: spec.label(),
                utterances: t.utterances,
                tokens: t.tokens,
                tpt_ms: tpt,
                speedup: if tpt > 0.0 { ar_tpt / tpt } else { 0.0 },
                lm_rtf: t.ar_seconds / t.audio_seconds.max(1e-9),
                tokens_per_forward: (t.tokens + t.eos_stops) as f64
                    / t.stats.target_forwards.max(1) as f64,
                target_forwards: t.stats.target_forwards,
                draft_forwards: t.stats.draft_forwards,
                acceptance_rate: t.stats.acceptance_rate(),
                thinning_trials: t.stats.thinning_trials,
                eos_stops: t.eos_stops,
                cer: teacher.as_ref().map(|_| t.errors.rate()),
                forced_choice: teacher
                    .as_ref()
                    .map(|_| t.identified as f64 / t.utterances.max(1) as f64),
                nll: t.nll.mean(),
            }
        })
        .collect();

    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| args.models.exp.join("bench"));
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let report = serde_json::json!({
        "benchmark": "decode",
        "split": args.split,
        "utterances": utterances.len(),
        "threads": rayon::current_num_threads(),
        "engine": args.models.engine,
        "sampler": {
            "temperature": sampler.temperature,
            "top_k": sampler.top_k,
            "top_p": sampler.top_p,
        },
        "models": {
            "ar": args.models.ar_dir(),
            "nar": args.models.nar_dir(),
            "codec": args.models.codec_dir(),
            "draft": args.draft,
        },
        "forward_cost": costs.iter().enumerate().map(|(i, c)| serde_json::json!({
            "k": i + 1, "median_ms": c, "relative_to_k1": c / costs[0],
        })).collect::<Vec<_>>(),
        "forced_choice": choice.as_ref().map(|(set, _)| serde_json::json!({
            "candidates": set.len(),
            "chance": set.chance(),
            "length_norm": set.length_norm(),
        })),
        "rows": rows,
    });
    let json_path = out_dir.join("bench-decode.json");
    voxspec_data::write_atomic(
        &json_path,
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )
    .with_context(|| format!("writing {}", json_path.display()))?;
    let chance = choice.as_ref().map(|(set, _)| (set.len(), set.chance()));
    let table = markdown(&rows, &costs, utterances.len(), chance);
    let md_path = out_dir.join("bench-decode.md");
    voxspec_data::write_atomic(&md_path, table.as_bytes())
        .with_context(|| format!("writing {}", md_path.display()))?;
    let plots = write_plots(&out_dir, &rows, teacher.is_some())?;
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
fn write_plots(dir: &std::path::Path, rows: &[Row], cer: bool) -> anyhow::Result<usize> {
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
    let over_heads = |metric: &dyn Fn(&Row) -> Option<f64>| -> Vec<Series> {
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

fn tpt_ms(t: &Tally) -> f64 {
    if t.tokens == 0 {
        0.0
    } else {
        1e3 * t.ar_seconds / t.tokens as f64
    }
}

fn fmt_opt(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{:.*}", digits, v * scale))
}

/// The markdown report: the decoder table, the forced-choice chance line (`chance` = number
/// of candidates and 1 / that, when a teacher scored) and the forward-cost line.
fn markdown(
    rows: &[Row],
    costs: &[f64],
    utterances: usize,
    chance: Option<(usize, f64)>,
) -> String {
    let cer = chance.is_some();
    let mut s = String::from(
        "| decoder | TPT (ms) | speedup | tokens/forward | acceptance | CER (%) | ID (%) | NLL \
         | EOS stops |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.2} | {:.2}x | {:.2} | {} | {} | {} | {} | {}/{} |\n",
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
    }
    let rel: Vec<String> = costs
        .iter()
        .enumerate()
        .map(|(i, c)| format!("k={}: {:.2}", i + 1, c / costs[0]))
        .collect();
    if let Some((n, p)) = chance {
        s.push_str(&format!(
            "\nID: forced-choice sentence identification by the CTC teacher among all {n} \
             transcripts of the split; chance = 1/{n} = {:.1} %.\n",
            100.0 * p
        ));
    }
    s.push_str(&format!(
        "\n{utterances} utterances. Forward cost over k new tokens relative to k = 1 on this \
         model and backend: {}.\n",
        rel.join(", ")
    ));
    s
}
