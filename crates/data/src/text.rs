//! Text normalisation and the text tokenizer (BPE or character level), stored as a Hugging Face
//! `tokenizer.json` so that Python's `tokenizers.Tokenizer.from_file` loads the same thing.
//!
//! # Normalisation
//! The normaliser is part of `tokenizer.json`, so voxspec and any other reader apply the same
//! steps, in this order:
//! 1. Unicode NFKC (compatibility forms folded: full-width letters, ligatures, ...);
//! 2. typographic quotes `‘ ’ ‚ ‛ ′` → `'` and `“ ” „ ‟ ″` → `"`;
//! 3. dashes `‐ ‑ ‒ – — ―` → `-`, and the ellipsis `…` → `...`;
//! 4. lowercase (unless [`Normalization::lowercase`] is false);
//! 5. every run of whitespace → one space, then leading/trailing whitespace removed.
//!
//! # Tokens
//! Pre-tokenisation is Metaspace (a space becomes `▁` and starts the next word, SentencePiece
//! style), so decoding restores the spaces. Ids 0–3 are the special tokens `<pad>`, `<unk>`,
//! `<bos>`, `<eos>`. A character not seen in training maps to `<unk>` and is reported with a
//! `tracing` warning naming it. [`TokenizerKind::Char`] keeps one token per character (no
//! merges); [`TokenizerKind::Bpe`] learns merges up to the requested vocabulary size.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokenizers::decoders::metaspace::Metaspace as MetaspaceDecoder;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainer};
use tokenizers::normalizers::{Lowercase, NFKC, Replace, Sequence, Strip};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizedString, Normalizer, NormalizerWrapper,
    PostProcessorWrapper, PreTokenizerWrapper, Tokenizer, TokenizerImpl,
};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;

/// Padding token (id 0).
pub const PAD: &str = "<pad>";
/// Unknown-character token (id 1).
pub const UNK: &str = "<unk>";
/// Beginning of sequence (id 2).
pub const BOS: &str = "<bos>";
/// End of sequence (id 3).
pub const EOS: &str = "<eos>";
/// The special tokens in id order.
pub const SPECIAL_TOKENS: [&str; 4] = [PAD, UNK, BOS, EOS];
/// The word-boundary marker used by the Metaspace pre-tokenizer.
pub const WORD_BOUNDARY: char = '▁';

/// Normalisation options (see the module documentation for the steps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    /// Lowercase the text (step 4).
    pub lowercase: bool,
}

impl Default for Normalization {
    fn default() -> Self {
        Normalization { lowercase: true }
    }
}

/// What kind of tokenizer to train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TokenizerKind {
    /// Byte-pair encoding with at most `vocab_size` tokens (special tokens included).
    Bpe {
        /// Target vocabulary size.
        vocab_size: usize,
    },
    /// One token per character seen in training.
    Char,
}

type Impl = TokenizerImpl<
    ModelWrapper,
    NormalizerWrapper,
    PreTokenizerWrapper,
    PostProcessorWrapper,
    DecoderWrapper,
>;

fn tok_err(path: Option<&Path>, e: impl std::fmt::Display) -> DataError {
    DataError::Tokenizer {
        path: path.map(Path::to_path_buf),
        detail: e.to_string(),
    }
}

fn normalizer(norm: &Normalization) -> Result<NormalizerWrapper> {
    let replace = |pattern: &str, content: &str| -> Result<NormalizerWrapper> {
        let r = Replace::new(
            tokenizers::normalizers::replace::ReplacePattern::Regex(pattern.to_string()),
            content,
        )
        .map_err(|e| tok_err(None, e))?;
        Ok(r.into())
    };
    let mut steps: Vec<NormalizerWrapper> = vec![
        NFKC.into(),
        replace("[‘’‚‛′]", "'")?,
        replace("[“”„‟″]", "\"")?,
        replace("[‐‑‒–—―]", "-")?,
        replace("…", "...")?,
    ];
    if norm.lowercase {
        steps.push(Lowercase.into());
    }
    steps.push(replace(r"\s+", " ")?);
    steps.push(Strip::new(true, true).into());
    Ok(Sequence::new(steps).into())
}

/// A trained text tokenizer with voxspec's special tokens.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    unk_id: u32,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab_size", &self.vocab_size())
            .finish()
    }
}

impl TextTokenizer {
    /// Trains a tokenizer on `texts` (each a transcript). Fails if no text is given.
    pub fn train<I, S>(texts: I, kind: TokenizerKind, norm: &Normalization) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let texts: Vec<String> = texts
            .into_iter()
            .map(|t| t.as_ref().to_string())
            .filter(|t| !t.trim().is_empty())
            .collect();
        if texts.is_empty() {
            return Err(DataError::Text {
                id: "training corpus".into(),
                detail: "no non-empty transcripts to train a tokenizer on".into(),
            });
        }
        let vocab_size = match kind {
            TokenizerKind::Bpe { vocab_size } => {
                if vocab_size <= SPECIAL_TOKENS.len() {
                    return Err(DataError::Config {
                        field: "vocab_size",
                        detail: format!(
                            "{vocab_size} leaves no room beside the {} special tokens",
                            SPECIAL_TOKENS.len()
                        ),
                    });
                }
                vocab_size
            }
            // The trainer adds the whole alphabet before merging; a target below that size
            // learns no merge at all, which is exactly a character-level tokenizer.
            TokenizerKind::Char => 1,
        };
        let model = BPE::builder()
            .unk_token(UNK.to_string())
            .build()
            .map_err(|e| tok_err(None, e))?;
        let mut tk: Impl = TokenizerImpl::new(ModelWrapper::BPE(model));
        tk.with_normalizer(Some(normalizer(norm)?))
            .map_err(|e| tok_err(None, e))?;
        tk.with_pre_tokenizer(Some(PreTokenizerWrapper::Metaspace(Metaspace::new(
            WORD_BOUNDARY,
            PrependScheme::Always,
            true,
        ))));
        tk.with_decoder(Some(DecoderWrapper::Metaspace(MetaspaceDecoder::new(
            WORD_BOUNDARY,
            PrependScheme::Always,
            true,
        ))));
        let specials: Vec<AddedToken> = SPECIAL_TOKENS
            .iter()
            .map(|t| AddedToken::from(*t, true))
            .collect();
        let mut trainer: TrainerWrapper = BpeTrainer::builder()
            .vocab_size(vocab_size)
            .min_frequency(if kind == TokenizerKind::Char { 1 } else { 2 })
            .special_tokens(specials.clone())
            .show_progress(false)
            .build()
            .into();
        tk.train(&mut trainer, texts.iter())
            .map_err(|e| tok_err(None, e))?;
        tk.add_special_tokens(specials)
            .map_err(|e| tok_err(None, e))?;
        Self::from_inner(Tokenizer::from(tk), None)
    }

    fn from_inner(inner: Tokenizer, path: Option<&Path>) -> Result<Self> {
        for (want, tok) in SPECIAL_TOKENS.iter().enumerate() {
            match inner.token_to_id(tok) {
                Some(id) if id as usize == want => {}
                Some(id) => {
                    return Err(tok_err(
                        path,
                        format!("special token {tok} has id {id}, expected {want}"),
                    ));
                }
                None => return Err(tok_err(path, format!("special token {tok} is missing"))),
            }
        }
        Ok(TextTokenizer { inner, unk_id: 1 })
    }

    /// Loads a `tokenizer.json` written by [`TextTokenizer::save`] (or any HF tokenizer with
    /// the same four special tokens at ids 0–3).
    pub fn load(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(tok_err(Some(path), "file not found"));
        }
        let inner = Tokenizer::from_file(path).map_err(|e| tok_err(Some(path), e))?;
        Self::from_inner(inner, Some(path))
    }

    /// Writes `tokenizer.json` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = self
            .inner
            .to_string(true)
            .map_err(|e| tok_err(Some(path), e))?;
        write_atomic(path, json.as_bytes())
    }

    /// Number of tokens, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Applies the normalisation stored in the tokenizer.
    pub fn normalize(&self, text: &str) -> Result<String> {
        let mut s = NormalizedString::from(text);
        if let Some(n) = self.inner.get_normalizer() {
            n.normalize(&mut s).map_err(|e| tok_err(None, e))?;
        }
        Ok(s.get().to_string())
    }

    /// Characters of `text` (after normalisation) that are not in the vocabulary.
    pub fn unknown_chars(&self, text: &str) -> Result<BTreeSet<char>> {
        let normalized = self.normalize(text)?;
        Ok(normalized
            .chars()
            .map(|c| if c == ' ' { WORD_BOUNDARY } else { c })
            .filter(|c| {
                self.inner
                    .token_to_id(c.encode_utf8(&mut [0u8; 4]))
                    .is_none()
            })
            .collect())
    }

    /// Encodes a transcript (no BOS/EOS added). Empty text is an error; characters unknown to
    /// the vocabulary become `<unk>` with a warning naming them.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, false)
            .map_err(|e| tok_err(None, e))?;
        let ids = enc.get_ids().to_vec();
        if ids.is_empty() {
            return Err(DataError::Text {
                id: text.chars().take(40).collect(),
                detail: "empty after normalisation".into(),
            });
        }
        if ids.contains(&self.unk_id) {
            let unknown = self.unknown_chars(text)?;
            tracing::warn!(
                "text {:?} has characters unknown to the tokenizer, mapped to {UNK}: {:?}",
                text.chars().take(60).collect::<String>(),
                unknown
            );
        }
        Ok(ids)
    }

    /// Decodes ids back to (normalised) text, skipping special tokens.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| tok_err(None, e))
    }
}

/// Where a tokenizer lives inside a prepared directory.
pub fn tokenizer_path(dir: &Path) -> PathBuf {
    dir.join("tokenizer.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXTS: [&str; 4] = [
        "The birch canoe slid on the smooth planks.",
        "Glue the sheet to the dark blue background.",
        "It’s easy to tell the depth of a well—these days.",
        "Rice is often served in round bowls.",
    ];

    #[test]
    fn normalisation_follows_the_documented_steps() {
        let tk =
            TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap();
        assert_eq!(
            tk.normalize("  It’s  “Ｆine”—\tREALLY… ").unwrap(),
            "it's \"fine\"- really..."
        );
        let keep = Normalization { lowercase: false };
        let tk = TextTokenizer::train(TEXTS, TokenizerKind::Char, &keep).unwrap();
        assert_eq!(tk.normalize("The  Cat").unwrap(), "The Cat");
    }

    #[test]
    fn char_tokenizer_roundtrips_and_has_one_token_per_char() {
        let tk =
            TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap();
        let ids = tk.encode("the smooth canoe").unwrap();
        assert_eq!(ids.len(), "the smooth canoe".chars().count() + 1); // + leading ▁
        assert_eq!(tk.decode(&ids).unwrap(), "the smooth canoe");
        for (i, t) in SPECIAL_TOKENS.iter().enumerate() {
            assert_eq!(tk.token_to_id(t), Some(i as u32));
        }
    }

    #[test]
    fn bpe_learns_merges_and_respects_vocab_size() {
        let chars = TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default())
            .unwrap()
            .vocab_size();
        let tk = TextTokenizer::train(
            TEXTS,
            TokenizerKind::Bpe {
                vocab_size: chars + 20,
            },
            &Normalization::default(),
        )
        .unwrap();
        assert!(
            tk.vocab_size() > chars && tk.vocab_size() <= chars + 20,
            "{}",
            tk.vocab_size()
        );
        let text = "the birch canoe slid on the smooth planks.";
        let ids = tk.encode(text).unwrap();
        assert!(
            ids.len() < text.chars().count(),
            "BPE should merge: {ids:?}"
        );
        assert_eq!(tk.decode(&ids).unwrap(), text);
    }

    #[test]
    fn unknown_characters_map_to_unk() {
        let tk =
            TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap();
        let ids = tk.encode("the zq").unwrap();
        assert!(ids.contains(&1), "{ids:?}");
        let unknown = tk.unknown_chars("the zq").unwrap();
        assert_eq!(unknown, BTreeSet::from(['q', 'z']));
    }

    #[test]
    fn empty_text_is_an_error() {
        let tk =
            TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap();
        assert!(matches!(tk.encode(" \t "), Err(DataError::Text { .. })));
        assert!(
            TextTokenizer::train([" "], TokenizerKind::Char, &Normalization::default()).is_err()
        );
    }

    #[test]
    fn save_then_load_gives_identical_encodings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        let tk = TextTokenizer::train(
            TEXTS,
            TokenizerKind::Bpe { vocab_size: 60 },
            &Normalization::default(),
        )
        .unwrap();
        tk.save(&p).unwrap();
        let back = TextTokenizer::load(&p).unwrap();
        for t in TEXTS {
            assert_eq!(tk.encode(t).unwrap(), back.encode(t).unwrap());
        }
        // The file is plain HF JSON with the normaliser inside.
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(json["model"]["type"], "BPE");
        assert_eq!(json["normalizer"]["type"], "Sequence");
    }

    #[test]
    fn loading_garbage_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.json");
        std::fs::write(&p, "{ not json").unwrap();
        let err = TextTokenizer::load(&p).unwrap_err().to_string();
        assert!(err.contains("bad.json"), "{err}");
    }
}
