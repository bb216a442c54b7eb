//! How a tokenizer fits a set of transcripts: characters per token, and for the phoneme
//! tokenizer how many words the pronouncing dictionary knows.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::g2p;
use crate::text::TextTokenizer;

/// Words of a set of transcripts that CMUdict knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DictionaryCoverage {
    /// Words in the transcripts (after normalisation).
    pub words: usize,
    /// Of those, the words in CMUdict (also with surrounding apostrophes removed).
    pub known: usize,
    /// The unknown words, most frequent first (ties alphabetically), at most the number asked
    /// for.
    pub most_frequent_unknown: Vec<String>,
}

/// How many words of `texts`, normalised by `tokenizer`, CMUdict knows (the rest go through
/// letter-to-sound rules), with the `top` most frequent unknown ones.
///
/// # Errors
/// The tokenizer's normalisation errors; a dictionary that does not load.
pub fn dictionary_coverage(
    tokenizer: &TextTokenizer,
    texts: &[String],
    top: usize,
) -> Result<DictionaryCoverage> {
    let (mut words, mut known) = (0usize, 0usize);
    let mut missing = BTreeMap::<String, usize>::new();
    for t in texts {
        for token in g2p::tokenize(&tokenizer.normalize(t)?) {
            if let g2p::Token::Word(w) = token {
                words += 1;
                if g2p::lookup(&w)?.is_some() || g2p::lookup(w.trim_matches('\''))?.is_some() {
                    known += 1;
                } else {
                    *missing.entry(w).or_default() += 1;
                }
            }
        }
    }
    let mut ranked: Vec<_> = missing.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(DictionaryCoverage {
        words,
        known,
        most_frequent_unknown: ranked.into_iter().take(top).map(|(w, _)| w).collect(),
    })
}

/// Characters per token of `tokenizer` over `texts` (a text it cannot encode counts no tokens).
pub fn chars_per_token(tokenizer: &TextTokenizer, texts: &[String]) -> f64 {
    let tokens: usize = texts
        .iter()
        .map(|t| tokenizer.encode(t).map(|ids| ids.len()).unwrap_or(0))
        .sum();
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    chars as f64 / tokens.max(1) as f64
}
