//! `voxspec bench acceptance`: offline acceptance rate α of speculative decoding and the
//! expected tokens per target forward, (1 − α^(γ+1)) / (1 − α), from teacher-forced logits on
//! a split's real code sequences — no decoding, one prefill and one extend per model and
//! utterance.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use burn::data::dataset::Dataset;
use clap::Args;
use serde::Serialize;
use voxspec_data::{MissingCodes, TextTokenizer, TokenStore, TtsDataset, read_manifest};
use voxspec_infer::acceptance::{
    ForcedSequence, OfflineAcceptance, teacher_forced, teacher_forced_head,
};
use voxspec_infer::verify::AcceptanceRule;
use voxspec_infer::{SamplerConfig, SimilarityGroups};
use voxspec_mtp::{TtsPrompt, load_mtp};

/// Offline α per acceptance rule for a target and a draft model (or, without --draft, for each
/// of the target's MTP heads drafting for its next-token head: self-speculation), on the
/// utterances of one split with their transcripts as text. Rules: exact (sd), SSD tolerance for
/// each --betas value above 0, and PCG when --groups is given.
#[derive(Debug, Args)]
pub struct AcceptanceArgs {
    /// Target AR model directory (`voxspec train mtp`).
    #[arg(long, value_name = "DIR")]
    target: PathBuf,
    /// Draft model directory (`voxspec train draft`); omit for self-speculation.
    #[arg(long, value_name = "DIR")]
    draft: Option<PathBuf>,
    /// Prepared data directory (manifests).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Token store directory.
    #[arg(long, value_name = "DIR")]
    tokens: PathBuf,
    /// Split to score.
    #[arg(long, default_value = "test")]
    split: String,
    /// Use at most this many utterances.
    #[arg(long, default_value_t = 50)]
    max_utterances: usize,
    /// Sampling temperature both distributions are taken at (> 0).
    #[arg(long, default_value_t = 1.0)]
    temperature: f32,
    /// SSD tolerances (comma-separated); 0 is the exact rule.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.4")]
    betas: Vec<f32>,
    /// PCG similarity groups (`voxspec groups build`).
    #[arg(long, value_name = "FILE")]
    groups: Option<PathBuf>,
    /// Draft lengths γ for the expected tokens per step.
    #[arg(long, value_delimiter = ',', default_value = "2,3,4")]
    gammas: Vec<usize>,
    /// Where to write the JSON report.
    #[arg(long, short, default_value = "bench-acceptance.json")]
    out: PathBuf,
}

#[derive(Debug, Serialize)]
struct Row {
    drafter: String,
    rule: String,
    beta: Option<f32>,
    positions: usize,
    alpha: f64,
    alpha_std: f64,
    /// `(γ, expected tokens per target forward)`.
    tokens_per_step: Vec<(usize, f64)>,
}

pub fn run(args: AcceptanceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.temperature.is_finite() && args.temperature > 0.0,
        "--temperature must be positive (acceptance at temperature 0 is 0 or 1 per position)"
    );
    anyhow::ensure!(
        args.gammas.iter().all(|&g| g > 0),
        "--gammas must all be at least 1"
    );
    let device = crate::device::single()?;
    let (_, target) = load_mtp(&args.target, &device)
        .with_context(|| format!("loading the target {}", args.target.display()))?;
    let tokenizer = TextTokenizer::load(&args.target.join("tokenizer.json"))?;
    let utts = read_manifest(&args.data.join(format!("{}.jsonl", args.split)))?;
    let store = TokenStore::open(&args.tokens, &args.split)
        .with_context(|| format!("opening the {} token store", args.split))?;
    // Teacher forcing needs the real codes' track: an aligned target takes each utterance's
    // forced-alignment durations (utterances without one are left out).
    let dataset = TtsDataset::new(&utts, &tokenizer, &store, MissingCodes::Skip)?;
    let mut sequences = Vec::new();
    for i in 0..dataset.len() {
        if sequences.len() >= args.max_utterances {
            break;
        }
        let item = dataset.get(i)?;
        let durations = match (target.is_aligned(), item.durations) {
            (true, None) => continue,
            (true, d) => d,
            (false, _) => None,
        };
        sequences.push(ForcedSequence {
            prompt: TtsPrompt {
                text: item.text,
                codes: Vec::new(),
                durations,
            },
            tokens: item.codes.stream(0).to_vec(),
        });
    }
    anyhow::ensure!(
        !sequences.is_empty(),
        "no utterance of the {} split has codes",
        args.split
    );
    let groups = match &args.groups {
        Some(p) => Some(Arc::new(SimilarityGroups::load(p)?)),
        None => None,
    };
    // One accumulator per rule; `betas[i]` labels rule i (None for PCG).
    let mut betas: Vec<Option<f32>> = args.betas.iter().map(|&b| Some(b)).collect();
    if groups.is_some() {
        betas.push(None);
    }
    let rules = || -> anyhow::Result<Vec<OfflineAcceptance>> {
        let mut rules = Vec::new();
        for &beta in &args.betas {
            let rule = if beta == 0.0 {
                AcceptanceRule::Exact
            } else {
                AcceptanceRule::Tolerance { beta }
            };
            rules.push(OfflineAcceptance::new(rule)?);
        }
        if let Some(g) = &groups {
            rules.push(OfflineAcceptance::new(AcceptanceRule::Groups(g.clone()))?);
        }
        Ok(rules)
    };
    let sampler = SamplerConfig {
        temperature: args.temperature,
        ..SamplerConfig::default()
    };
    let mut runs: Vec<(String, Vec<OfflineAcceptance>)> = Vec::new();
    match &args.draft {
        Some(dir) => {
            let (_, draft) = load_mtp(dir, &device)
                .with_context(|| format!("loading the draft {}", dir.display()))?;
            let mut accs = rules()?;
            teacher_forced(&target, &draft, &sequences, &sampler, &mut accs)?;
            runs.push(("draft".into(), accs));
        }
        None => {
            anyhow::ensure!(
                target.n_heads() > 1,
                "the target has one head: give --draft, or train it with --heads > 1"
            );
            for head in 1..target.n_heads() {
                let mut accs = rules()?;
                teacher_forced_head(&target, head, &sequences, &sampler, &mut accs)?;
                runs.push((format!("head{head}"), accs));
            }
        }
    }
    let mut rows = Vec::new();
    for (drafter, accs) in runs {
        for (&beta, acc) in betas.iter().zip(accs) {
            rows.push(Row {
                drafter: drafter.clone(),
                rule: acc.rule().name().to_string(),
                beta,
                positions: acc.positions(),
                alpha: acc.mean_alpha().unwrap_or(0.0),
                alpha_std: acc.std_alpha().unwrap_or(0.0),
                tokens_per_step: args
                    .gammas
                    .iter()
                    .map(|&g| (g, acc.expected_tokens_per_step(g).unwrap_or(1.0)))
                    .collect(),
            });
        }
    }
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "benchmark": "acceptance",
        "split": args.split,
        "utterances": sequences.len(),
        "temperature": args.temperature,
        "rows": rows,
    }))?;
    voxspec_data::write_atomic(&args.out, json.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    let gammas: Vec<String> = args
        .gammas
        .iter()
        .map(|g| format!("E[tokens] γ={g}"))
        .collect();
    println!("| drafter | rule | β | α | {} |", gammas.join(" | "));
    println!("|---|---|---|---|{}", "---|".repeat(gammas.len()));
    for r in &rows {
        let t: Vec<String> = r
            .tokens_per_step
            .iter()
            .map(|(_, t)| format!("{t:.2}"))
            .collect();
        println!(
            "| {} | {} | {} | {:.3} | {} |",
            r.drafter,
            r.rule,
            r.beta.map_or("-".into(), |b| b.to_string()),
            r.alpha,
            t.join(" | ")
        );
    }
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
