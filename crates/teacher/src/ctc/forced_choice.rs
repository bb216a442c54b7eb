//! Forced-choice sentence identification: an intelligibility measure that can fail.
//!
//! Greedy CER by a small recogniser cannot tell babble from speech when the recogniser itself
//! makes many errors (the shipped teacher gives real speech 42 % and babble 70 %). Here the
//! recogniser only has to *choose*: for a clip `x` and a set of `N` candidate transcripts
//! `y_1 … y_N` (one of which is the clip's own), every candidate is scored by its CTC
//! log-likelihood `log p(y_k | x)` (the forward algorithm over the teacher's frame
//! log-probabilities), and the clip is *identified* when its own transcript scores strictly
//! highest. Ties count against, so a clip that carries no information (silence, noise, a
//! scorer that ignores the clip) is identified by at most chance, `1 / N`.
//!
//! ```text
//!  clip ──teacher (once)──▶ log-probs [frames, classes]
//!                               │
//!          ┌────────────────────┼────────────────────┐
//!    CTC forward(y_1)     CTC forward(y_2)  …  CTC forward(y_N)      (parallel, host)
//!          └──────────────▶ scores [N] ──▶ rank of the own transcript
//! ```
//!
//! Candidates are the teacher tokenizer's normalised texts, deduplicated (two sentences that
//! normalise alike are one candidate). The score is `log p(y | x) / len(y)` by default
//! ([`LengthNorm::PerLabel`]): every emitted label costs probability, so raw `log p(y | x)`
//! ([`LengthNorm::None`]) favours short candidates. Measured with the shipped teacher on the 60
//! test-clean originals of `datasets/minitts` (60 candidates): 60/60 identified per label
//! against 59/60 raw (the miss: a 47-character sentence losing to a 35-character one); on the
//! codec's resynthesis the gap widens (full RVQ 55/60 against 45/60, RVQ-1 47/60 against
//! 39/60). Both rules stay at chance on noise, silence and deranged transcripts
//! (`crates/teacher/tests/forced_choice.rs`).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use voxspec_data::TextTokenizer;

use super::cer::ErrorCounts;
use super::decode::collapse_path;
use super::loss::ctc_log_likelihood;
use super::model::BLANK;
use crate::error::TeacherError;

/// Frame log-probabilities of one clip, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct LogProbs {
    /// Valid frames (50 Hz for the teacher).
    pub frames: usize,
    /// Classes per frame (blank included).
    pub classes: usize,
    /// `[frames, classes]` row-major log-softmax values.
    pub data: Vec<f32>,
}

impl LogProbs {
    /// Wraps a `[frames, classes]` row-major matrix.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] when `data` does not hold `frames × classes` values.
    pub fn new(frames: usize, classes: usize, data: Vec<f32>) -> Result<Self, TeacherError> {
        if data.len() != frames * classes {
            return Err(TeacherError::InvalidInput {
                what: "log-probs",
                reason: format!(
                    "{} values for {frames} frames × {classes} classes",
                    data.len()
                ),
            });
        }
        Ok(Self {
            frames,
            classes,
            data,
        })
    }

    /// Best-path label sequence (argmax per frame, repeats merged, blanks dropped).
    pub fn greedy(&self, blank: u32) -> Vec<u32> {
        let path: Vec<u32> = self
            .data
            .chunks_exact(self.classes.max(1))
            .map(|row| {
                let mut best = 0;
                for (k, &v) in row.iter().enumerate() {
                    if v > row[best] {
                        best = k;
                    }
                }
                best as u32
            })
            .collect();
        collapse_path(&path, blank)
    }
}

/// How a candidate's log-likelihood becomes its score.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LengthNorm {
    /// `log p(y | x)`.
    None,
    /// `log p(y | x) / len(y)` (labels of the candidate): the default.
    #[default]
    PerLabel,
}

/// One candidate transcript: the normalised text and its label ids.
#[derive(Debug, Clone, PartialEq)]
struct Candidate {
    text: String,
    ids: Vec<u32>,
}

/// The outcome of one clip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClipChoice {
    /// Index of the clip's own transcript among the candidates.
    pub own: usize,
    /// Index of the highest-scoring candidate (the first of equal ones).
    pub best: usize,
    /// 1 + the number of *other* candidates scoring at least as high as the own one (ties
    /// count against; a non-finite own score ranks below every finite one).
    pub rank: usize,
    /// Score of the own transcript (`−∞` when unreachable or non-finite).
    pub own_score: f64,
    /// Score of the best candidate.
    pub best_score: f64,
    /// `rank == 1`.
    pub identified: bool,
}

/// A clip's forced choice together with its greedy transcript and character errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClipVerdict {
    /// The forced choice.
    #[serde(flatten)]
    pub choice: ClipChoice,
    /// Greedy transcript by the teacher.
    pub hypothesis: String,
    /// Character errors of `hypothesis` against the own (normalised) transcript.
    pub errors: ErrorCounts,
}

/// Accuracy, chance and CER over a set of clips.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ForcedChoiceSummary {
    /// Clips scored.
    pub clips: usize,
    /// Candidates each clip chose among.
    pub candidates: usize,
    /// Clips whose own transcript ranked first.
    pub identified: usize,
    /// `identified / clips`.
    pub accuracy: f64,
    /// `1 / candidates`: the expected accuracy of a clip that carries no information.
    pub chance: f64,
    /// Mean rank of the own transcript (1 is best, `(candidates + 1) / 2` is chance).
    pub mean_rank: f64,
    /// Corpus CER of the greedy transcripts (total edits / total reference characters).
    pub cer: f64,
    /// The character error counts behind `cer`.
    pub errors: ErrorCounts,
}

impl ForcedChoiceSummary {
    /// Summarises verdicts chosen among `candidates` candidates.
    pub fn new<'a>(verdicts: impl IntoIterator<Item = &'a ClipVerdict>, candidates: usize) -> Self {
        let mut s = Self {
            candidates,
            chance: if candidates == 0 {
                0.0
            } else {
                1.0 / candidates as f64
            },
            ..Self::default()
        };
        let mut rank_sum = 0usize;
        for v in verdicts {
            s.clips += 1;
            s.identified += usize::from(v.choice.identified);
            rank_sum += v.choice.rank;
            s.errors += v.errors;
        }
        if s.clips > 0 {
            s.accuracy = s.identified as f64 / s.clips as f64;
            s.mean_rank = rank_sum as f64 / s.clips as f64;
        }
        s.cer = s.errors.rate();
        s
    }
}

/// A candidate set and the scoring rule: chooses, for each clip, among the candidates.
#[derive(Debug, Clone)]
pub struct ForcedChoice {
    candidates: Vec<Candidate>,
    norm: LengthNorm,
}

impl ForcedChoice {
    /// Normalises and encodes `texts` with the teacher's `tokenizer`; duplicates (after
    /// normalisation) are kept once, in first-seen order.
    ///
    /// # Errors
    /// [`TeacherError::Data`] for a text that is empty after normalisation;
    /// [`TeacherError::InvalidInput`] for an empty set.
    pub fn new<'a>(
        tokenizer: &TextTokenizer,
        texts: impl IntoIterator<Item = &'a str>,
        norm: LengthNorm,
    ) -> Result<Self, TeacherError> {
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for text in texts {
            let normalised = tokenizer.normalize(text)?;
            if seen.insert(normalised.clone()) {
                let ids = tokenizer.encode(text)?;
                candidates.push(Candidate {
                    text: normalised,
                    ids,
                });
            }
        }
        Self::from_ids(candidates.into_iter().map(|c| (c.text, c.ids)), norm)
    }

    /// A candidate set of already-encoded `(normalised text, label ids)` pairs, kept as given.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] for an empty set, or a candidate without labels or
    /// containing the blank.
    pub fn from_ids(
        candidates: impl IntoIterator<Item = (String, Vec<u32>)>,
        norm: LengthNorm,
    ) -> Result<Self, TeacherError> {
        let candidates: Vec<Candidate> = candidates
            .into_iter()
            .map(|(text, ids)| Candidate { text, ids })
            .collect();
        if candidates.is_empty() {
            return Err(TeacherError::InvalidInput {
                what: "forced-choice candidates",
                reason: "the candidate set is empty".into(),
            });
        }
        if let Some(c) = candidates
            .iter()
            .find(|c| c.ids.is_empty() || c.ids.contains(&BLANK))
        {
            return Err(TeacherError::InvalidInput {
                what: "forced-choice candidate",
                reason: format!("{:?} has no labels or contains the blank", c.text),
            });
        }
        Ok(Self { candidates, norm })
    }

    /// Number of candidates `N`.
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Always false: a set has at least one candidate.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// `1 / N`.
    pub fn chance(&self) -> f64 {
        1.0 / self.len() as f64
    }

    /// The scoring rule.
    pub fn length_norm(&self) -> LengthNorm {
        self.norm
    }

    /// The same set with another scoring rule.
    pub fn with_length_norm(mut self, norm: LengthNorm) -> Self {
        self.norm = norm;
        self
    }

    /// The normalised text of candidate `i`.
    pub fn text(&self, i: usize) -> Option<&str> {
        self.candidates.get(i).map(|c| c.text.as_str())
    }

    /// Index of the candidate whose normalised text equals `text` normalised by `tokenizer`.
    ///
    /// # Errors
    /// [`TeacherError::Data`] if the normaliser fails.
    pub fn position(
        &self,
        tokenizer: &TextTokenizer,
        text: &str,
    ) -> Result<Option<usize>, TeacherError> {
        let normalised = tokenizer.normalize(text)?;
        Ok(self.candidates.iter().position(|c| c.text == normalised))
    }

    /// Scores of every candidate for one clip, in candidate order (parallel over candidates):
    /// `log p(y_k | x)` or its per-label mean. Unreachable candidates and non-finite values
    /// score `−∞`.
    ///
    /// # Shapes
    /// `log_probs`: `[frames, classes]` → `[N]`.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] when a candidate label is not below `classes`.
    pub fn scores(&self, log_probs: &LogProbs) -> Result<Vec<f64>, TeacherError> {
        self.candidates
            .par_iter()
            .map(|c| {
                let ll = ctc_log_likelihood(
                    &log_probs.data,
                    log_probs.frames,
                    log_probs.classes,
                    &c.ids,
                    BLANK,
                )?;
                let score = match self.norm {
                    LengthNorm::None => ll,
                    LengthNorm::PerLabel => ll / c.ids.len() as f64,
                };
                Ok(if score.is_finite() {
                    score
                } else {
                    f64::NEG_INFINITY
                })
            })
            .collect()
    }

    /// The forced choice of one clip whose own transcript is candidate `own`.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] when `own` is not a candidate index; as
    /// [`ForcedChoice::scores`].
    pub fn choose(&self, log_probs: &LogProbs, own: usize) -> Result<ClipChoice, TeacherError> {
        if own >= self.len() {
            return Err(TeacherError::InvalidInput {
                what: "forced-choice own transcript",
                reason: format!("index {own} is not below the {} candidates", self.len()),
            });
        }
        Ok(rank(&self.scores(log_probs)?, own))
    }

    /// Forced choice, greedy transcript and character errors of one clip.
    ///
    /// # Errors
    /// As [`ForcedChoice::choose`]; [`TeacherError::Data`] if the tokenizer cannot decode.
    pub fn judge(
        &self,
        tokenizer: &TextTokenizer,
        log_probs: &LogProbs,
        own: usize,
    ) -> Result<ClipVerdict, TeacherError> {
        let choice = self.choose(log_probs, own)?;
        let hypothesis = tokenizer.decode(&log_probs.greedy(BLANK))?;
        let errors = ErrorCounts::between(&hypothesis, &self.candidates[own].text);
        Ok(ClipVerdict {
            choice,
            hypothesis,
            errors,
        })
    }
}

/// The rank of candidate `own` among `scores` (see [`ClipChoice::rank`]); `scores` is not
/// empty and `own < scores.len()`.
fn rank(scores: &[f64], own: usize) -> ClipChoice {
    let clean = |s: f64| if s.is_nan() { f64::NEG_INFINITY } else { s };
    let own_score = clean(scores[own]);
    let mut best = 0;
    for (k, &s) in scores.iter().enumerate() {
        if clean(s) > clean(scores[best]) {
            best = k;
        }
    }
    let rivals = scores
        .iter()
        .enumerate()
        .filter(|&(k, &s)| k != own && clean(s) >= own_score)
        .count();
    ClipChoice {
        own,
        best,
        rank: 1 + rivals,
        own_score,
        best_score: clean(scores[best]),
        identified: rivals == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Classes: 0 blank, 1 'a', 2 'b', 3 'c'.
    const CLASSES: usize = 4;

    /// A clip that says `labels`, each for two frames with a blank between: confident rows
    /// (0.9 on the spoken class, the rest spread evenly).
    fn clip(labels: &[u32]) -> LogProbs {
        let mut path = vec![0u32];
        for &l in labels {
            path.extend([l, l, 0]);
        }
        let mut data = Vec::new();
        for &k in &path {
            for c in 0..CLASSES as u32 {
                let p: f32 = if c == k { 0.9 } else { 0.1 / 3.0 };
                data.push(p.ln());
            }
        }
        LogProbs::new(path.len(), CLASSES, data).unwrap()
    }

    /// Candidate sentences over the toy alphabet: "ab", "ba", "abc", "cab".
    fn candidates() -> Vec<(String, Vec<u32>)> {
        [
            ("ab", vec![1, 2]),
            ("ba", vec![2, 1]),
            ("abc", vec![1, 2, 3]),
            ("cab", vec![3, 1, 2]),
        ]
        .into_iter()
        .map(|(t, ids)| (t.to_string(), ids))
        .collect()
    }

    /// Whether `score` identifies every toy clip (each saying one candidate) by the rule of
    /// [`rank`]: the check that the real scorer passes and a broken one fails.
    fn identifies_all(score: &dyn Fn(&LogProbs, &[u32]) -> f64) -> bool {
        let cands = candidates();
        cands.iter().enumerate().all(|(own, (_, ids))| {
            let lp = clip(ids);
            let scores: Vec<f64> = cands.iter().map(|(_, c)| score(&lp, c)).collect();
            rank(&scores, own).identified
        })
    }

    #[test]
    fn the_spoken_candidate_wins() {
        let set = ForcedChoice::from_ids(candidates(), LengthNorm::None).unwrap();
        for (own, (_, ids)) in candidates().iter().enumerate() {
            let c = set.choose(&clip(ids), own).unwrap();
            assert!(c.identified, "candidate {own}: {c:?}");
            assert_eq!((c.rank, c.best), (1, own));
            assert!(c.own_score.is_finite());
        }
        let real = |lp: &LogProbs, ids: &[u32]| {
            ctc_log_likelihood(&lp.data, lp.frames, lp.classes, ids, BLANK).unwrap()
        };
        assert!(identifies_all(&real));
    }

    #[test]
    fn a_scorer_that_ignores_the_clip_fails() {
        // Shorter is likelier, whatever was said: one clip at most can win.
        let by_length = |_: &LogProbs, ids: &[u32]| -(ids.len() as f64);
        assert!(!identifies_all(&by_length));
        // A constant score ties everywhere, and ties count against.
        let constant = |_: &LogProbs, _: &[u32]| 0.0;
        assert!(!identifies_all(&constant));
        // The clip read backwards (time reversed) is another sentence.
        let reversed = |lp: &LogProbs, ids: &[u32]| {
            let rows: Vec<f32> = lp
                .data
                .chunks_exact(lp.classes)
                .rev()
                .flatten()
                .copied()
                .collect();
            ctc_log_likelihood(&rows, lp.frames, lp.classes, ids, BLANK).unwrap()
        };
        assert!(!identifies_all(&reversed));
    }

    #[test]
    fn ties_and_non_finite_scores_count_against() {
        let c = rank(&[-1.0, -1.0, -5.0], 0);
        assert_eq!((c.rank, c.identified), (2, false));
        let c = rank(&[f64::NEG_INFINITY, f64::NEG_INFINITY], 1);
        assert_eq!((c.rank, c.identified), (2, false));
        let c = rank(&[f64::NAN, -3.0], 0);
        assert_eq!((c.rank, c.identified, c.best), (2, false, 1));
        let c = rank(&[-2.0, f64::NAN, -3.0], 0);
        assert_eq!((c.rank, c.identified), (1, true));
    }

    #[test]
    fn unreachable_candidates_are_never_identified() {
        // One frame: every candidate needs at least two, so all score −∞ and tie.
        let lp = LogProbs::new(1, CLASSES, vec![0.25f32.ln(); CLASSES]).unwrap();
        let set = ForcedChoice::from_ids(candidates(), LengthNorm::None).unwrap();
        let scores = set.scores(&lp).unwrap();
        assert!(scores.iter().all(|s| *s == f64::NEG_INFINITY), "{scores:?}");
        for own in 0..set.len() {
            assert!(!set.choose(&lp, own).unwrap().identified);
        }
    }

    #[test]
    fn summary_counts_accuracy_and_chance() {
        let v = |identified: bool, rank: usize| ClipVerdict {
            choice: ClipChoice {
                own: 0,
                best: 0,
                rank,
                own_score: -1.0,
                best_score: -1.0,
                identified,
            },
            hypothesis: "ab".into(),
            errors: ErrorCounts::between("ab", "abc"),
        };
        let s = ForcedChoiceSummary::new(&[v(true, 1), v(false, 3), v(true, 1), v(false, 7)], 8);
        assert_eq!((s.clips, s.identified, s.candidates), (4, 2, 8));
        assert!((s.accuracy - 0.5).abs() < 1e-12);
        assert!((s.chance - 0.125).abs() < 1e-12);
        assert!((s.mean_rank - 3.0).abs() < 1e-12);
        assert!((s.cer - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn bad_sets_are_refused() {
        assert!(ForcedChoice::from_ids(Vec::new(), LengthNorm::None).is_err());
        assert!(ForcedChoice::from_ids([("x".into(), vec![])], LengthNorm::None).is_err());
        assert!(ForcedChoice::from_ids([("x".into(), vec![0, 1])], LengthNorm::None).is_err());
        let set = ForcedChoice::from_ids(candidates(), LengthNorm::None).unwrap();
        assert!(set.choose(&clip(&[1]), 4).is_err());
        // A label past the clip's classes.
        let small = LogProbs::new(3, 2, vec![0.5f32.ln(); 6]).unwrap();
        assert!(set.scores(&small).is_err());
    }
}
