//! Character error rate: the Levenshtein distance between a hypothesis and a reference, over
//! Unicode scalar values, divided by the reference length.
//!
//! Used for the CTC teacher's dev score and, later, as voxspec's built-in intelligibility score
//! of resynthesised and synthesised speech (transcribe with the teacher, compare with the text).
//! Both strings should be normalised the same way first (the teacher's tokenizer does it).
//!
//! A corpus CER is the sum of edits over the sum of reference lengths ([`ErrorCounts`]), not the
//! mean of per-utterance rates, so long utterances weigh more, as in the usual ASR scoring.

use serde::{Deserialize, Serialize};

/// Edit operations of one alignment between a hypothesis and a reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCounts {
    /// Reference characters replaced by another character.
    pub substitutions: usize,
    /// Reference characters missing from the hypothesis.
    pub deletions: usize,
    /// Hypothesis characters absent from the reference.
    pub insertions: usize,
    /// Characters in the reference.
    pub reference_len: usize,
}

impl ErrorCounts {
    /// Counts of a minimal alignment of `hypothesis` against `reference` (character level).
    pub fn between(hypothesis: &str, reference: &str) -> Self {
        let hyp: Vec<char> = hypothesis.chars().collect();
        let reference: Vec<char> = reference.chars().collect();
        align(&hyp, &reference)
    }

    /// Total edits: substitutions + deletions + insertions (the Levenshtein distance).
    pub fn edits(&self) -> usize {
        self.substitutions + self.deletions + self.insertions
    }

    /// `edits / reference_len`; 0 for two empty strings, 1 per inserted character when only the
    /// reference is empty (so an empty reference never divides by zero).
    pub fn rate(&self) -> f64 {
        if self.reference_len == 0 {
            self.edits() as f64
        } else {
            self.edits() as f64 / self.reference_len as f64
        }
    }
}

impl std::ops::Add for ErrorCounts {
    type Output = ErrorCounts;

    fn add(self, other: ErrorCounts) -> ErrorCounts {
        ErrorCounts {
            substitutions: self.substitutions + other.substitutions,
            deletions: self.deletions + other.deletions,
            insertions: self.insertions + other.insertions,
            reference_len: self.reference_len + other.reference_len,
        }
    }
}

impl std::ops::AddAssign for ErrorCounts {
    fn add_assign(&mut self, other: ErrorCounts) {
        *self = *self + other;
    }
}

impl std::iter::Sum for ErrorCounts {
    fn sum<I: Iterator<Item = ErrorCounts>>(iter: I) -> Self {
        iter.fold(ErrorCounts::default(), |a, b| a + b)
    }
}

/// Levenshtein distance between two strings, over characters.
pub fn levenshtein(a: &str, b: &str) -> usize {
    ErrorCounts::between(a, b).edits()
}

/// Character error rate of one hypothesis against one reference (see [`ErrorCounts::rate`]).
pub fn cer(hypothesis: &str, reference: &str) -> f64 {
    ErrorCounts::between(hypothesis, reference).rate()
}

/// Corpus CER of (hypothesis, reference) pairs: total edits over total reference characters.
pub fn corpus_cer<'a, I>(pairs: I) -> ErrorCounts
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    pairs
        .into_iter()
        .map(|(h, r)| ErrorCounts::between(h, r))
        .sum()
}

/// Dynamic programme over `[hyp + 1, ref + 1]` cells keeping, per cell, the cheapest edit count
/// and its split into operations (ties broken substitution < deletion < insertion, so the split
/// is deterministic; the total is minimal whatever the tie rule).
fn align<T: PartialEq>(hyp: &[T], reference: &[T]) -> ErrorCounts {
    // Cell = (edits, substitutions, deletions, insertions); one row of the reference at a time.
    type Cell = (usize, usize, usize, usize);
    let mut prev: Vec<Cell> = (0..=reference.len()).map(|j| (j, 0, j, 0)).collect();
    let mut cur: Vec<Cell> = vec![(0, 0, 0, 0); reference.len() + 1];
    for (i, h) in hyp.iter().enumerate() {
        cur[0] = (i + 1, 0, 0, i + 1);
        for (j, r) in reference.iter().enumerate() {
            let diag = prev[j];
            let up = prev[j + 1]; // hypothesis character unmatched: insertion
            let left = cur[j]; // reference character unmatched: deletion
            let sub = if h == r {
                diag
            } else {
                (diag.0 + 1, diag.1 + 1, diag.2, diag.3)
            };
            let del = (left.0 + 1, left.1, left.2 + 1, left.3);
            let ins = (up.0 + 1, up.1, up.2, up.3 + 1);
            let mut best = sub;
            if del.0 < best.0 {
                best = del;
            }
            if ins.0 < best.0 {
                best = ins;
            }
            cur[j + 1] = best;
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    let (_, substitutions, deletions, insertions) = prev[reference.len()];
    ErrorCounts {
        substitutions,
        deletions,
        insertions,
        reference_len: reference.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_distances() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
        assert_eq!(levenshtein("abc", ""), 3);
        assert_eq!(levenshtein("same", "same"), 0);
        assert_eq!(levenshtein("flaw", "lawn"), 2);
        // Characters, not bytes: one substitution of a two-byte letter.
        assert_eq!(levenshtein("café", "cafe"), 1);
    }

    #[test]
    fn operations_are_split_correctly() {
        let c = ErrorCounts::between("the cat", "the cart");
        assert_eq!((c.substitutions, c.deletions, c.insertions), (0, 1, 0));
        let c = ErrorCounts::between("the caart", "the cart");
        assert_eq!((c.substitutions, c.deletions, c.insertions), (0, 0, 1));
        let c = ErrorCounts::between("the dart", "the cart");
        assert_eq!((c.substitutions, c.deletions, c.insertions), (1, 0, 0));
        assert_eq!(c.reference_len, 8);
        assert!((c.rate() - 1.0 / 8.0).abs() < 1e-12);
    }

    #[test]
    fn empty_reference_does_not_divide_by_zero() {
        assert_eq!(cer("", ""), 0.0);
        assert_eq!(cer("ab", ""), 2.0);
        assert_eq!(cer("", "ab"), 1.0);
    }

    #[test]
    fn corpus_cer_weighs_by_reference_length() {
        let total = corpus_cer([("a", "b"), ("abcdefghi", "abcdefghi")]);
        assert_eq!(total.edits(), 1);
        assert_eq!(total.reference_len, 10);
        assert!((total.rate() - 0.1).abs() < 1e-12);
    }

    /// The distance is a metric: symmetric, zero only on equal strings, triangle inequality;
    /// checked on pseudo-random strings over a small alphabet against a plain full-matrix DP.
    #[test]
    fn metric_properties_on_random_strings() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut word = |max: u64| -> String {
            let len = next() % (max + 1);
            (0..len)
                .map(|_| (b'a' + (next() % 3) as u8) as char)
                .collect()
        };
        for _ in 0..200 {
            let (a, b, c) = (word(8), word(8), word(8));
            let ab = levenshtein(&a, &b);
            assert_eq!(ab, levenshtein(&b, &a), "{a:?} {b:?}");
            assert_eq!(ab == 0, a == b);
            assert!(levenshtein(&a, &c) <= ab + levenshtein(&b, &c));
            assert_eq!(ab, full_matrix(&a, &b), "{a:?} {b:?}");
        }
    }

    fn full_matrix(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                d[i][j] = (d[i - 1][j] + 1)
                    .min(d[i][j - 1] + 1)
                    .min(d[i - 1][j - 1] + cost);
            }
        }
        d[a.len()][b.len()]
    }
}
