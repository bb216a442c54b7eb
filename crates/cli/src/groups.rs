//! `voxspec groups build`: PCG's acoustic similarity groups (Yanuka et al., "Principled
//! Coarse-Grained Acceptance for Speculative Decoding in Speech") from a trained AR model's
//! code embeddings, stored as CSR in safetensors for the `Groups` acceptance rule.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use voxspec_infer::groups::{SimilarityGroups, groups_of_mean_size, sweep_theta};
use voxspec_mtp::load_mtp;

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Build similarity groups over the codes (and end-of-speech) of an AR model.
    Build(BuildArgs),
}

/// Groups G(t) = {t' : cos(E_t, E_t') > θ} over the rows of the model's input embedding that
/// belong to codes; end-of-speech, which is never an input, forms a group of its own.
/// Groups overlap; each token's probability mass is later split equally over its groups.
#[derive(Debug, Args)]
pub struct BuildArgs {
    /// Model directory of `voxspec train mtp` (or a draft's target).
    #[arg(long, value_name = "DIR")]
    checkpoint: PathBuf,
    /// Cosine threshold θ in (−1, 1) [default: the θ of --mean-size 4.5].
    #[arg(long, allow_hyphen_values = true, conflicts_with = "mean_size")]
    theta: Option<f32>,
    /// Choose θ so that the groups have this mean size (the paper's ablation: 4.5, 10.3).
    #[arg(long, value_name = "SIZE")]
    mean_size: Option<f64>,
    /// Output file (default: <CHECKPOINT>/groups.safetensors).
    #[arg(long, short, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also summarise these thresholds (comma-separated), e.g. 0.3,0.4,0.5,0.6.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    sweep: Vec<f32>,
}

pub fn run(cmd: GroupsCommand) -> anyhow::Result<()> {
    match cmd {
        GroupsCommand::Build(args) => build(args),
    }
}

/// Prints the size statistics of `groups`, and a warning when every group is a singleton (PCG
/// then accepts exactly what exact speculative sampling accepts).
pub(crate) fn report(groups: &SimilarityGroups) {
    let s = groups.summary();
    eprintln!(
        "PCG groups at θ {:.4}: {} groups over {} tokens, mean size {:.2}, max {}, mean groups per token {:.2}",
        s.theta,
        s.n_groups,
        groups.vocab(),
        s.mean_group_size,
        s.max_group_size,
        s.mean_memberships
    );
    if s.max_group_size <= 1 {
        eprintln!(
            "warning: every group at θ {:.4} has one member, so PCG equals exact speculative \
             sampling; choose a lower θ or a mean group size (--mean-size, --group-sizes)",
            s.theta
        );
    }
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let (_, model) = load_mtp(&args.checkpoint, &voxspec_train::device::single()?)
        .with_context(|| format!("loading {}", args.checkpoint.display()))?;
    let (table, vocab, dim) = model.code_embeddings()?;
    let groups = match args.theta {
        Some(theta) => SimilarityGroups::from_embeddings(&table, vocab, dim, theta)?,
        None => groups_of_mean_size(&table, vocab, dim, args.mean_size.unwrap_or(4.5))?,
    };
    report(&groups);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.checkpoint.join("groups.safetensors"));
    groups
        .save(&out)
        .with_context(|| format!("writing {}", out.display()))?;
    println!("wrote {}", out.display());
    if !args.sweep.is_empty() {
        println!("| θ | groups | mean size | max size | groups per token |\n|---|---|---|---|---|");
        for s in sweep_theta(&table, vocab, dim, &args.sweep)? {
            println!(
                "| {} | {} | {:.2} | {} | {:.2} |",
                s.theta, s.n_groups, s.mean_group_size, s.max_group_size, s.mean_memberships
            );
        }
    }
    Ok(())
}
