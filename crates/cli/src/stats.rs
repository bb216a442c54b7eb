//! `voxspec stats transitions`: the stream-0 token transition matrix Q that Viterbi path
//! selection reads (Nguyen et al. 2025, §III-C), estimated from a token store.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use voxspec_data::TokenStore;
use voxspec_infer::{TransitionCounts, Transitions, TransitionsConfig};

#[derive(Debug, Subcommand)]
pub enum StatsCommand {
    /// Stream-0 transition statistics Q(a → b) for Viterbi decoding, as safetensors.
    Transitions(TransitionsArgs),
}

/// Count stream-0 bigrams over every utterance of a token store (end-of-speech, id
/// `codebook_size`, follows each utterance's last code), smooth them with add-α and store the
/// row-normalised log-probabilities: dense for vocabularies up to --dense-max-vocab, else the
/// --top-k most frequent successors per row plus a floor for the rest.
#[derive(Debug, Args)]
pub struct TransitionsArgs {
    /// Token store directory (`<split>-NNNNN.safetensors` shards from `voxspec codec extract`).
    #[arg(long, value_name = "DIR")]
    tokens: PathBuf,
    /// Split to count.
    #[arg(long, default_value = "train")]
    split: String,
    /// Output file.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// Add-α smoothing pseudo-count.
    #[arg(long, default_value_t = 1.0)]
    alpha: f32,
    /// Largest vocabulary stored dense.
    #[arg(long, default_value_t = 2048)]
    dense_max_vocab: usize,
    /// Successors kept per row when sparse.
    #[arg(long, default_value_t = 64)]
    top_k: usize,
}

pub fn run(cmd: StatsCommand) -> anyhow::Result<()> {
    match cmd {
        StatsCommand::Transitions(args) => transitions(args),
    }
}

fn transitions(args: TransitionsArgs) -> anyhow::Result<()> {
    let store = TokenStore::open(&args.tokens, &args.split)
        .with_context(|| format!("opening the {} token store", args.split))?;
    anyhow::ensure!(
        !store.is_empty(),
        "token store {} is empty",
        args.tokens.display()
    );
    let meta = store.meta();
    let eos = meta.codebook_size;
    let config = TransitionsConfig {
        alpha: args.alpha,
        dense_max_vocab: args.dense_max_vocab,
        top_k: args.top_k,
    };
    let mut counts = TransitionCounts::new(meta.codebook_size as usize + 1, &config)?;
    let mut ids = store.ids();
    ids.sort_unstable();
    let mut sequence = Vec::new();
    for id in ids {
        let Some(codes) = store.get(id) else { continue };
        sequence.clear();
        sequence.extend_from_slice(codes.stream(0));
        sequence.push(eos);
        counts
            .add(&sequence)
            .with_context(|| format!("counting utterance {id}"))?;
    }
    let q = Transitions::from_counts(&counts, &config)?;
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    q.save(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let (sequences, pairs) = q.counted();
    println!(
        "transitions over {} tokens ({}) from {sequences} utterances, {pairs} pairs → {}",
        q.vocab_size(),
        if q.is_dense() {
            "dense"
        } else {
            "top-k sparse"
        },
        args.out.display()
    );
    Ok(())
}
