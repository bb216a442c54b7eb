//! `voxspec tokenizer train | encode`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use voxspec_data::{
    Normalization, TextTokenizer, TokenizerKind, chars_per_token, dictionary_coverage,
    read_manifest,
};

#[derive(Debug, Subcommand)]
pub enum TokenizerCommand {
    /// Train a BPE or character tokenizer on manifest transcripts, or write the fixed phoneme
    /// tokenizer (CMUdict + letter-to-sound rules); writes tokenizer.json.
    ///
    /// The normalisation (NFKC, ASCII quotes and dashes, lowercase unless --keep-case, collapsed
    /// whitespace) is stored in tokenizer.json, so Python's `tokenizers.Tokenizer.from_file`
    /// reproduces it. Special tokens: <pad>=0 <unk>=1 <bos>=2 <eos>=3.
    ///
    /// --kind phoneme writes a fixed vocabulary (the special tokens, then SIL and the 39 ARPAbet
    /// phones without stress) as a WordLevel tokenizer over phone names. voxspec encodes text
    /// with it by grapheme-to-phoneme conversion: the CMU pronouncing dictionary (bundled, no
    /// network), and approximate letter-to-sound rules for words not in it; digits are spelled
    /// out; SIL marks the start, the end and phrase punctuation. It needs no manifest.
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
    /// One token per ARPAbet phone (SIL + 39, no stress). Text is converted with the bundled
    /// CMUdict and approximate letter-to-sound rules for words it lacks; the vocabulary is
    /// fixed, so no manifest or --vocab-size is needed (a manifest only reports how many of
    /// its words CMUdict knows).
    Phoneme,
}

/// Arguments of `voxspec tokenizer train` (documented on the subcommand).
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Manifest(s) whose transcripts to train on (usually train.jsonl); required for bpe and
    /// char, optional for phoneme (dictionary coverage report only).
    #[arg(long, value_name = "JSONL")]
    manifest: Vec<PathBuf>,
    /// Output tokenizer.json.
    #[arg(long, short, value_name = "FILE")]
    out: PathBuf,
    /// Tokenizer kind.
    #[arg(long, value_enum, default_value = "bpe")]
    kind: KindArg,
    /// Vocabulary size for BPE (special tokens included); ignored by char and phoneme.
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
    if a.manifest.is_empty() && !matches!(a.kind, KindArg::Phoneme) {
        anyhow::bail!(
            "--manifest is required for --kind bpe and char: their vocabulary is learned from transcripts"
        );
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
        KindArg::Phoneme => TokenizerKind::Phoneme,
    };
    let norm = Normalization {
        lowercase: !a.keep_case,
    };
    let tk = TextTokenizer::train(&texts, kind, &norm).context("training the tokenizer")?;
    tk.save(&a.out)?;
    if tk.is_phonemic() {
        println!(
            "wrote phoneme tokenizer ({} tokens) to {}",
            tk.vocab_size(),
            a.out.display()
        );
        if !texts.is_empty() {
            report_dictionary_coverage(&tk, &texts)?;
        }
        return Ok(());
    }
    println!(
        "trained {:?} tokenizer on {} transcripts: {} tokens, {:.2} characters per token; wrote {}",
        a.kind,
        texts.len(),
        tk.vocab_size(),
        chars_per_token(&tk, &texts),
        a.out.display()
    );
    Ok(())
}

/// Prints how many words of `texts` CMUdict knows (the rest go through letter-to-sound rules).
fn report_dictionary_coverage(tk: &TextTokenizer, texts: &[String]) -> anyhow::Result<()> {
    let c = dictionary_coverage(tk, texts, 10)?;
    println!(
        "{} of {} words ({:.1} %) in CMUdict; the rest use letter-to-sound rules{}",
        c.known,
        c.words,
        100.0 * c.known as f64 / c.words.max(1) as f64,
        if c.most_frequent_unknown.is_empty() {
            String::new()
        } else {
            format!(" (most frequent: {})", c.most_frequent_unknown.join(", "))
        }
    );
    Ok(())
}

fn encode(a: EncodeArgs) -> anyhow::Result<()> {
    let tk = TextTokenizer::load(&a.tokenizer)?;
    println!("normalized: {}", tk.normalize(&a.text)?);
    let ids = tk.encode(&a.text)?;
    println!("ids: {ids:?}");
    if tk.is_phonemic() {
        println!("phones: {}", tk.decode(&ids)?);
    }
    let unknown = tk.unknown_chars(&a.text)?;
    if !unknown.is_empty() {
        if tk.is_phonemic() {
            println!("characters G2P cannot pronounce (dropped): {unknown:?}");
        } else {
            println!("unknown characters (→ <unk>): {unknown:?}");
        }
    }
    Ok(())
}
