//! Text normalisation and the text tokenizer (BPE, character level or phonemes), stored as a
//! Hugging Face `tokenizer.json` so that Python's `tokenizers.Tokenizer.from_file` loads the same
//! thing.
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
//!
//! # Phonemes
//! [`TokenizerKind::Phoneme`] has a fixed vocabulary: the four special tokens, then the 40 phones
//! of [`PHONES`] in order (ids 4–43), stored as a standard `WordLevel` model with a whitespace
//! pre-tokenizer and no normaliser or decoder, so Python's `tokenizers` encodes space-separated
//! phone strings (`"SIL DH AH K AE T SIL"`) and decodes ids back to them. A loaded tokenizer is
//! phonemic when its model is `WordLevel` with exactly that vocabulary
//! ([`TextTokenizer::is_phonemic`]). Its [`TextTokenizer::encode`] takes ordinary text: the
//! default normalisation above (lowercase; applied by voxspec, not stored in the file), then
//! [`crate::g2p::g2p`] (CMUdict + letter-to-sound rules), then phone ids;
//! [`TextTokenizer::decode`] gives the space-separated phones and
//! [`TextTokenizer::encode_phones`] maps aligner phone labels to ids.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tokenizers::decoders::metaspace::Metaspace as MetaspaceDecoder;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainer};
use tokenizers::models::wordlevel::WordLevel;
use tokenizers::normalizers::{Lowercase, NFKC, Replace, Sequence, Strip};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
use tokenizers::{
    AddedToken, DecoderWrapper, ModelWrapper, NormalizedString, Normalizer, NormalizerWrapper,
    PostProcessorWrapper, PreTokenizerWrapper, Tokenizer, TokenizerImpl,
};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;
use crate::g2p;
use crate::phones::{PHONES, normalize_phone, phone_index};

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
/// Id of the first phone ([`PHONES`]`[0]`) in a phoneme tokenizer: phones follow the special
/// tokens.
pub const FIRST_PHONE_ID: u32 = SPECIAL_TOKENS.len() as u32;

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
    /// One token per phone of [`PHONES`]; text goes through grapheme-to-phoneme conversion
    /// (CMUdict, then letter-to-sound rules). The vocabulary is fixed: training needs no text.
    Phoneme,
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

/// The vocabulary of a phoneme tokenizer: special tokens, then [`PHONES`].
fn phoneme_vocab() -> HashMap<String, u32> {
    SPECIAL_TOKENS
        .iter()
        .chain(PHONES.iter())
        .zip(0u32..)
        .map(|(t, id)| (t.to_string(), id))
        .collect()
}

/// The `WordLevel` tokenizer over [`phoneme_vocab`] (see the module documentation).
fn phoneme_tokenizer() -> Result<Tokenizer> {
    // WordLevel's builder wants an `ahash` map; its serde form takes the vocabulary as JSON.
    let json = serde_json::json!({
        "type": "WordLevel",
        "vocab": phoneme_vocab(),
        "unk_token": UNK,
    });
    let model: WordLevel = serde_json::from_str(&json.to_string()).map_err(|e| tok_err(None, e))?;
    let mut tk: Impl = TokenizerImpl::new(ModelWrapper::WordLevel(model));
    tk.with_pre_tokenizer(Some(PreTokenizerWrapper::WhitespaceSplit(WhitespaceSplit)));
    let specials: Vec<AddedToken> = SPECIAL_TOKENS
        .iter()
        .map(|t| AddedToken::from(*t, true))
        .collect();
    tk.add_special_tokens(specials)
        .map_err(|e| tok_err(None, e))?;
    Ok(Tokenizer::from(tk))
}

/// A trained text tokenizer with voxspec's special tokens.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    unk_id: u32,
    /// For a phoneme tokenizer, the normaliser applied to text before G2P (the file has none:
    /// its tokens are phone names).
    phonemic: Option<NormalizerWrapper>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("phonemic", &self.is_phonemic())
            .finish()
    }
}

impl TextTokenizer {
    /// Trains a tokenizer on `texts` (each a transcript). Fails if no text is given, except for
    /// [`TokenizerKind::Phoneme`], whose vocabulary is fixed: it ignores `texts` and `norm`
    /// (G2P is case-insensitive; text is normalised with [`Normalization::default`]).
    pub fn train<I, S>(texts: I, kind: TokenizerKind, norm: &Normalization) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if kind == TokenizerKind::Phoneme {
            return Self::from_inner(phoneme_tokenizer()?, None);
        }
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
            TokenizerKind::Char | TokenizerKind::Phoneme => 1,
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
        let is_phonemic = matches!(inner.get_model(), ModelWrapper::WordLevel(_))
            && inner.get_vocab(true) == phoneme_vocab();
        let phonemic = if is_phonemic {
            Some(normalizer(&Normalization::default())?)
        } else {
            None
        };
        Ok(TextTokenizer {
            inner,
            unk_id: 1,
            phonemic,
        })
    }

    /// Whether this is a phoneme tokenizer ([`TokenizerKind::Phoneme`], or a loaded file whose
    /// model is `WordLevel` over exactly the special tokens and [`PHONES`]).
    pub fn is_phonemic(&self) -> bool {
        self.phonemic.is_some()
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

    /// Applies the normalisation stored in the tokenizer (for a phoneme tokenizer, the default
    /// normalisation that precedes G2P).
    pub fn normalize(&self, text: &str) -> Result<String> {
        let mut s = NormalizedString::from(text);
        if let Some(n) = self.phonemic.as_ref().or(self.inner.get_normalizer()) {
            n.normalize(&mut s).map_err(|e| tok_err(None, e))?;
        }
        Ok(s.get().to_string())
    }

    /// Characters of `text` (after normalisation) that are not in the vocabulary; for a phoneme
    /// tokenizer, those that G2P can neither pronounce nor read as a pause or separator.
    pub fn unknown_chars(&self, text: &str) -> Result<BTreeSet<char>> {
        let normalized = self.normalize(text)?;
        if self.is_phonemic() {
            return Ok(g2p::unpronounceable_chars(&normalized));
        }
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
    /// the vocabulary become `<unk>` with a warning naming them. A phoneme tokenizer
    /// normalises, runs G2P and returns phone ids (unpronounceable characters are dropped with
    /// a warning).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        if self.is_phonemic() {
            return self.encode_text_as_phones(text);
        }
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

    /// Decodes ids back to (normalised) text, skipping special tokens; for a phoneme tokenizer,
    /// the phones separated by single spaces.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, true).map_err(|e| tok_err(None, e))
    }

    fn encode_text_as_phones(&self, text: &str) -> Result<Vec<u32>> {
        let normalized = self.normalize(text)?;
        let unknown = g2p::unpronounceable_chars(&normalized);
        if !unknown.is_empty() {
            tracing::warn!(
                "text {:?} has characters G2P cannot pronounce, dropped: {:?}",
                text.chars().take(60).collect::<String>(),
                unknown
            );
        }
        let phones = g2p::g2p(&normalized).map_err(|e| match e {
            DataError::Text { .. } => DataError::Text {
                id: text.chars().take(40).collect(),
                detail: "no word to pronounce after normalisation".into(),
            },
            other => other,
        })?;
        phones
            .iter()
            .enumerate()
            .map(|(index, p)| {
                phone_id(p).ok_or_else(|| DataError::UnknownPhone {
                    label: p.to_string(),
                    index,
                })
            })
            .collect()
    }

    /// Maps phone labels from an aligner or dictionary (any spelling
    /// [`normalize_phone`] accepts: `AH0`, `ah`, `ax`, `pau`, `sil`, ...) to ids of this
    /// phoneme tokenizer. Fails on the first unknown label, naming it and its position, and on
    /// a tokenizer that is not phonemic.
    pub fn encode_phones(&self, labels: &[impl AsRef<str>]) -> Result<Vec<u32>> {
        if !self.is_phonemic() {
            return Err(tok_err(
                None,
                "encode_phones needs a phoneme tokenizer (train one with kind phoneme)",
            ));
        }
        labels
            .iter()
            .enumerate()
            .map(|(index, label)| {
                let label = label.as_ref();
                normalize_phone(label)
                    .and_then(phone_id)
                    .ok_or_else(|| DataError::UnknownPhone {
                        label: label.to_string(),
                        index,
                    })
            })
            .collect()
    }
}

/// Id of a canonical phone of [`PHONES`] in a phoneme tokenizer.
fn phone_id(phone: &str) -> Option<u32> {
    phone_index(phone).map(|i| FIRST_PHONE_ID + i as u32)
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
    fn phoneme_tokenizer_roundtrips_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        let no_texts: [&str; 0] = [];
        let tk = TextTokenizer::train(no_texts, TokenizerKind::Phoneme, &Normalization::default())
            .unwrap();
        assert!(tk.is_phonemic());
        assert_eq!(tk.vocab_size(), SPECIAL_TOKENS.len() + PHONES.len());
        tk.save(&p).unwrap();
        let back = TextTokenizer::load(&p).unwrap();
        assert!(back.is_phonemic());
        for (i, t) in SPECIAL_TOKENS.iter().chain(PHONES.iter()).enumerate() {
            assert_eq!(back.token_to_id(t), Some(i as u32), "{t}");
        }
        let ids = back.encode("The  CAT sat.").unwrap();
        assert_eq!(ids, tk.encode("the cat sat.").unwrap());
        assert_eq!(back.decode(&ids).unwrap(), "SIL DH AH K AE T S AE T SIL");
        assert_eq!(ids[0], FIRST_PHONE_ID, "SIL is the first phone");
        // The file is a standard WordLevel tokenizer over phone names.
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(json["model"]["type"], "WordLevel");
        assert_eq!(json["model"]["vocab"]["ZH"], 43);
        assert_eq!(json["pre_tokenizer"]["type"], "WhitespaceSplit");
        assert!(json["normalizer"].is_null());
        // Its own encoder reads phone strings back (what Python's tokenizers does with it).
        let inner = back.inner.encode("SIL DH AH SIL", false).unwrap();
        assert_eq!(inner.get_ids(), &[4, 14, 7, 4]);
    }

    #[test]
    fn other_tokenizers_are_not_phonemic() {
        let tk =
            TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap();
        assert!(!tk.is_phonemic());
        let err = tk.encode_phones(&["AH"]).unwrap_err().to_string();
        assert!(err.contains("phoneme tokenizer"), "{err}");
    }

    #[test]
    fn encode_phones_accepts_aligner_spellings_and_names_unknown_labels() {
        let no_texts: [&str; 0] = [];
        let tk = TextTokenizer::train(no_texts, TokenizerKind::Phoneme, &Normalization::default())
            .unwrap();
        let flite = tk
            .encode_phones(&["pau", "hh", "ax", "l", "ow", "pau"])
            .unwrap();
        let mfa = tk
            .encode_phones(&["", "HH", "AH0", "L", "OW1", "sp"])
            .unwrap();
        assert_eq!(flite, mfa);
        assert_eq!(tk.decode(&flite).unwrap(), "SIL HH AH L OW SIL");
        let err = tk.encode_phones(&["HH", "AH0", "QX", "L"]).unwrap_err();
        assert!(
            matches!(&err, DataError::UnknownPhone { label, index: 2 } if label == "QX"),
            "{err:?}"
        );
        assert!(err.to_string().contains("\"QX\""), "{err}");
    }

    #[test]
    fn phoneme_encode_of_unpronounceable_text_is_an_error() {
        let no_texts: [&str; 0] = [];
        let tk = TextTokenizer::train(no_texts, TokenizerKind::Phoneme, &Normalization::default())
            .unwrap();
        assert!(matches!(tk.encode(" ... "), Err(DataError::Text { .. })));
        assert_eq!(tk.unknown_chars("a % b").unwrap(), BTreeSet::from(['%']));
        assert_eq!(tk.normalize("It’s  OK").unwrap(), "it's ok");
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
