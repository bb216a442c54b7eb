//! `voxspec bench acceptance`: offline acceptance rate α of speculative decoding and the
//! expected tokens per target forward, (1 − α^(γ+1)) / (1 − α), from teacher-forced logits on
//! a split's real code sequences — no decoding, one prefill and one extend per model and
//! utterance.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use voxspec_eval::bench_acceptance::{
    AcceptanceReport, AcceptanceSettings, acceptance_markdown, measure_acceptance, split_sequences,
};
use voxspec_infer::SimilarityGroups;
use voxspec_mtp::load_mtp;

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

pub fn run(args: AcceptanceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.temperature.is_finite() && args.temperature > 0.0,
        "--temperature must be positive (acceptance at temperature 0 is 0 or 1 per position)"
    );
    anyhow::ensure!(
        args.gammas.iter().all(|&g| g > 0),
        "--gammas must all be at least 1"
    );
    let device = voxspec_train::device::single()?;
    let (_, target) = load_mtp(&args.target, &device)
        .with_context(|| format!("loading the target {}", args.target.display()))?;
    let sequences = split_sequences(
        &args.target,
        &args.data,
        &args.tokens,
        &args.split,
        target.is_aligned(),
        args.max_utterances,
    )?;
    let groups = match &args.groups {
        Some(p) => Some(Arc::new(SimilarityGroups::load(p)?)),
        None => None,
    };
    let settings = AcceptanceSettings {
        temperature: args.temperature,
        betas: args.betas.clone(),
        groups,
        gammas: args.gammas.clone(),
    };
    let draft = match &args.draft {
        Some(dir) => Some(
            load_mtp(dir, &device)
                .with_context(|| format!("loading the draft {}", dir.display()))?
                .1,
        ),
        None => {
            anyhow::ensure!(
                target.n_heads() > 1,
                "the target has one head: give --draft, or train it with --heads > 1"
            );
            None
        }
    };
    let rows = measure_acceptance(&target, draft.as_ref(), &sequences, &settings)?;
    let report = AcceptanceReport {
        benchmark: "acceptance",
        split: args.split.clone(),
        utterances: sequences.len(),
        temperature: args.temperature,
        rows,
    };
    voxspec_eval::write_report_sorted(&args.out, &report)
        .with_context(|| format!("writing {}", args.out.display()))?;
    print!("{}", acceptance_markdown(&report.rows, &args.gammas));
    eprintln!("wrote {}", args.out.display());
    Ok(())
}
