//! `voxspec prepare`: corpus → manifests.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use voxspec_data::{Layout, PrepareConfig, TranscriptKind, prepare};

use crate::progress::Bar;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LayoutArg {
    /// <root>/<subset>/<speaker>/<chapter>/<utt>.wav + <utt>.normalized.txt / .original.txt
    Libritts,
    /// <root>/<utt>.wav + <root>/<utt>.txt (speaker = part of <utt> before the first '_')
    Plain,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TranscriptArg {
    Normalized,
    Original,
}

/// Scan a corpus and write train.jsonl, dev.jsonl, test.jsonl and summary.json.
///
/// Every file is decoded in full (use --header-only to trust headers); files that cannot be
/// read, have no transcript or fall outside the duration bounds are skipped and counted by
/// reason. Rerunning with the same settings keeps the finished manifests; --force rebuilds them.
/// Utterances get their phone alignment from <utt>.TextGrid beside the audio or under
/// --alignments (a warning counts those without one).
#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Corpus root (for LibriTTS: the directory holding train-clean-100, dev-clean, ...).
    #[arg(long, value_name = "DIR")]
    corpus: PathBuf,
    /// Output directory for the manifests.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Corpus layout.
    #[arg(long, value_enum, default_value = "libritts")]
    layout: LayoutArg,
    /// LibriTTS subsets for the train split (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "train-clean-100")]
    train_subsets: Vec<String>,
    /// LibriTTS subsets for the dev split (comma separated; empty for none).
    #[arg(long, value_delimiter = ',', default_value = "dev-clean")]
    dev_subsets: Vec<String>,
    /// LibriTTS subsets for the test split (comma separated; empty for none).
    #[arg(long, value_delimiter = ',', default_value = "test-clean")]
    test_subsets: Vec<String>,
    /// Plain layout: fraction of utterances held out for dev (stable hash of the id).
    #[arg(long, default_value_t = 0.05)]
    dev_fraction: f64,
    /// Plain layout: fraction held out for test.
    #[arg(long, default_value_t = 0.05)]
    test_fraction: f64,
    /// Skip utterances shorter than this (seconds).
    #[arg(long, default_value_t = 0.5)]
    min_duration: f64,
    /// Skip utterances longer than this (seconds).
    #[arg(long, default_value_t = 20.0)]
    max_duration: f64,
    /// Which LibriTTS transcript to prefer (the other is the fallback).
    #[arg(long, value_enum, default_value = "normalized")]
    transcript: TranscriptArg,
    /// Directory of phone alignments (Praat TextGrids, e.g. from the Montreal Forced Aligner),
    /// searched as DIR/<speaker>/<chapter>/<utt>.TextGrid, DIR/<speaker>/<utt>.TextGrid and
    /// DIR/<utt>.TextGrid. A <utt>.TextGrid beside the audio is always used when there is none.
    #[arg(long, value_name = "DIR")]
    alignments: Option<PathBuf>,
    /// Read only headers instead of decoding every file (faster, misses truncated files).
    #[arg(long)]
    header_only: bool,
    /// Rebuild manifests even if finished ones exist.
    #[arg(long)]
    force: bool,
}

fn non_empty(v: Vec<String>) -> Vec<String> {
    v.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

pub fn run(args: PrepareArgs) -> anyhow::Result<()> {
    let base = match args.layout {
        LayoutArg::Libritts => PrepareConfig::libritts(&args.corpus),
        LayoutArg::Plain => PrepareConfig::plain(&args.corpus),
    };
    let is_libritts = matches!(args.layout, LayoutArg::Libritts);
    let config = PrepareConfig {
        layout: if is_libritts {
            Layout::LibriTts
        } else {
            Layout::Plain
        },
        train_subsets: if is_libritts {
            non_empty(args.train_subsets)
        } else {
            vec![]
        },
        dev_subsets: if is_libritts {
            non_empty(args.dev_subsets)
        } else {
            vec![]
        },
        test_subsets: if is_libritts {
            non_empty(args.test_subsets)
        } else {
            vec![]
        },
        dev_fraction: if is_libritts { 0.0 } else { args.dev_fraction },
        test_fraction: if is_libritts { 0.0 } else { args.test_fraction },
        min_duration: args.min_duration,
        max_duration: args.max_duration,
        transcript: match args.transcript {
            TranscriptArg::Normalized => TranscriptKind::Normalized,
            TranscriptArg::Original => TranscriptKind::Original,
        },
        verify_audio: !args.header_only,
        alignments: args.alignments,
        ..base
    };
    let outcome = prepare(&config, &args.out, args.force, &Bar::new())
        .with_context(|| format!("preparing {}", args.corpus.display()))?;
    if outcome.reused {
        println!(
            "manifests in {} are up to date (same settings); --force rebuilds them",
            args.out.display()
        );
    }
    print!("{}", outcome.summary);
    println!("summary: {}", args.out.join("summary.json").display());
    Ok(())
}

pub(crate) use voxspec_data::SplitManifest;

/// The manifests of `splits` in the prepared directory `data`, read; a split without one is
/// skipped (printed).
pub(crate) fn split_manifests(
    data: &Path,
    splits: &[String],
) -> anyhow::Result<Vec<SplitManifest>> {
    Ok(voxspec_data::read_splits(data, splits, |split, path| {
        println!("{split}: no {} — skipped", path.display());
    })?)
}
