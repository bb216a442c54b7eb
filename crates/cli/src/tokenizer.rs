//! `voxspec tokenizer train | encode`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use voxspec_data::{Normalization, TextTokenizer, TokenizerKind, read_manifest};

#[derive(Debug, Subcommand)]
pub enum TokenizerCommand {
    /// Train a BPE or character tokenizer on manifest transcripts; writes tokenizer.json.
    Train(TrainArgs),
    /// Normalise and encode text with a trained tokenizer (prints ids and tokens).
    Encode(EncodeArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum KindArg {
    /// Byte-pair encoding up to --vocab-size tokens.
    Bpe,
    /// One token per character.
    Char,
}

/// Train a text tokenizer. The normalisation (NFKC, ASCII quotes and dashes, lowercase unless
/// --keep-case, collapsed whitespace) is stored in tokenizer.json, so Python's
/// `tokenizers.Tokenizer.from_file` reproduces it. Special tokens: <pad>=0 <unk>=1 <bos>=2 <eos>=3.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Manifest(s) whose transcripts to train on (usually train.jsonl).
    #[arg(long, required = true, value_name = "JSONL")]
    manifest: Vec<PathBuf>,
    /// Output tokenizer.json.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// Tokenizer kind.
    #[arg(long, value_enum, default_value = "bpe")]
    kind: KindArg,
    /// Vocabulary size for BPE (special tokens included).
    #[arg(long, default_value_t = 256)]
    vocab_size: usize,
    /// Keep letter case instead of lowercasing.
    #[arg(long)]
    keep_case: bool,
    /// Overwrite an existing tokenizer.
    #[arg(long)]
    force: bool,
}

#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// tokenizer.json to use.
    #[arg(long, value_name = "FILE")]
    tokenizer: PathBuf,
    /// Text to encode.
    #[arg(long)]
    text: String,
}

pub fn run(cmd: TokenizerCommand) -> anyhow::Result<()> {
    match cmd {
        TokenizerCommand::Train(a) => train(a),
        TokenizerCommand::Encode(a) => encode(a),
    }
}

fn train(a: TrainArgs) -> anyhow::Result<()> {
    if a.out.exists() && !a.force {
        let tk = TextTokenizer::load(&a.out).with_context(|| {
            format!(
                "{} exists but cannot be loaded; --force replaces it",
                a.out.display()
            )
        })?;
        println!(
            "{} exists ({} tokens); --force retrains it",
            a.out.display(),
            tk.vocab_size()
        );
        return Ok(());
    }
    let mut texts = Vec::new();
    for m in &a.manifest {
        let utts = read_manifest(m).with_context(|| format!("reading {}", m.display()))?;
        texts.extend(utts.into_iter().map(|u| u.text));
    }
    let kind = match a.kind {
        KindArg::Bpe => TokenizerKind::Bpe {
            vocab_size: a.vocab_size,
        },
        KindArg::Char => TokenizerKind::Char,
    };
    let norm = Normalization {
        lowercase: !a.keep_case,
    };
    let tk = TextTokenizer::train(&texts, kind, &norm).context("training the tokenizer")?;
    tk.save(&a.out)?;
    let total: usize = texts
        .iter()
        .map(|t| tk.encode(t).map(|ids| ids.len()).unwrap_or(0))
        .sum();
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    println!(
        "trained {:?} tokenizer on {} transcripts: {} tokens, {:.2} characters per token; wrote {}",
        a.kind,
        texts.len(),
        tk.vocab_size(),
        chars as f64 / total.max(1) as f64,
        a.out.display()
    );
    Ok(())
}

fn encode(a: EncodeArgs) -> anyhow::Result<()> {
    let tk = TextTokenizer::load(&a.tokenizer)?;
    println!("normalized: {}", tk.normalize(&a.text)?);
    let ids = tk.encode(&a.text)?;
    println!("ids: {ids:?}");
    let unknown = tk.unknown_chars(&a.text)?;
    if !unknown.is_empty() {
        println!("unknown characters (→ <unk>): {unknown:?}");
    }
    Ok(())
}
