//! The state sequence a transcript allows: one state per phone, in order, with the pauses the
//! speaker may or may not have made.
//!
//! A path through the states visits every state for at least one frame, in order, except that
//! an *optional* state may be skipped. The sequence follows the text front end that synthesis
//! uses ([`voxspec_data::g2p`]): `SIL` at the start, at every phrase break (punctuation) and at
//! the end is *required*, so that the alignments a model is trained on carry the same phones as
//! the sentences it is later asked to speak; a pause between two words with no punctuation is
//! *optional* (inserted only where the audio has one).
//!
//! ```text
//! "Hello, old friend."  →  SIL HH AH L OW SIL OW L D [SIL] F R EH N D SIL
//!                           req                req         opt               req
//! ```

use voxspec_data::g2p::{self, Token};
use voxspec_data::phones::{PHONES, SIL, phone_index};

use crate::error::AlignError;

/// Class index of silence in [`PHONES`] (and in the aligner's output).
pub const SIL_CLASS: u32 = 0;

/// Number of output classes of the aligner: the phone set, silence included.
pub const N_CLASSES: usize = PHONES.len();

/// The states of one utterance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Class ([`PHONES`] index) of every state.
    pub classes: Vec<u32>,
    /// Whether each state may be skipped.
    pub optional: Vec<bool>,
}

impl Topology {
    /// Every state required (a known phone sequence, e.g. a reference alignment's).
    ///
    /// # Errors
    /// [`AlignError::InvalidInput`] for an empty sequence or a class outside the phone set.
    pub fn required(classes: Vec<u32>) -> Result<Self, AlignError> {
        let optional = vec![false; classes.len()];
        Self::new(classes, optional)
    }

    /// A topology from its parts.
    ///
    /// # Errors
    /// [`AlignError::InvalidInput`] for mismatched lengths, an empty or all-optional sequence,
    /// or a class outside the phone set.
    pub fn new(classes: Vec<u32>, optional: Vec<bool>) -> Result<Self, AlignError> {
        if classes.len() != optional.len() {
            return Err(AlignError::input(
                "topology",
                format!(
                    "{} classes but {} optional flags",
                    classes.len(),
                    optional.len()
                ),
            ));
        }
        if optional.iter().all(|&o| o) {
            return Err(AlignError::input(
                "topology",
                "no required state (empty transcript?)",
            ));
        }
        if let Some(&bad) = classes.iter().find(|&&c| c as usize >= N_CLASSES) {
            return Err(AlignError::input(
                "topology",
                format!("class {bad} is outside the {N_CLASSES} phones"),
            ));
        }
        Ok(Self { classes, optional })
    }

    /// The states of a normalised sentence (see the module documentation).
    ///
    /// # Errors
    /// [`AlignError::Data`] when the text holds no word to pronounce.
    pub fn from_text(normalized: &str) -> Result<Self, AlignError> {
        let sil = SIL_CLASS;
        let mut classes = vec![sil];
        let mut optional = vec![false];
        let mut words = 0usize;
        for token in g2p::tokenize(normalized) {
            match token {
                Token::Break => {
                    if classes.last() == Some(&sil) {
                        // A break after a pause (or another break) makes it required.
                        if let Some(o) = optional.last_mut() {
                            *o = false;
                        }
                    } else {
                        classes.push(sil);
                        optional.push(false);
                    }
                }
                Token::Word(w) => {
                    let phones = g2p::pronounce(&w)?;
                    if phones.is_empty() {
                        continue;
                    }
                    if words > 0 && classes.last() != Some(&sil) {
                        classes.push(sil);
                        optional.push(true);
                    }
                    for p in phones {
                        classes.push(class_of(p)?);
                        optional.push(false);
                    }
                    words += 1;
                }
            }
        }
        if words == 0 {
            return Err(AlignError::input(
                "transcript",
                format!("no word to pronounce in {normalized:?}"),
            ));
        }
        if classes.last() == Some(&sil) {
            if let Some(o) = optional.last_mut() {
                *o = false;
            }
        } else {
            classes.push(sil);
            optional.push(false);
        }
        Self::new(classes, optional)
    }

    /// Number of states.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Always false: a topology has at least one required state.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Frames a path needs at least: one per required state.
    pub fn min_frames(&self) -> usize {
        self.optional.iter().filter(|&&o| !o).count()
    }

    /// The topology with every non-silence state repeated `copies` times in a row (required
    /// copies of a required state, optional ones of an optional state), and for each new
    /// state the index of the state it copies.
    ///
    /// # Errors
    /// As [`Topology::new`].
    pub fn with_min_frames(&self, copies: usize) -> Result<(Self, Vec<usize>), AlignError> {
        let mut classes = Vec::new();
        let mut optional = Vec::new();
        let mut owner = Vec::new();
        for (s, (&class, &opt)) in self.classes.iter().zip(&self.optional).enumerate() {
            let n = if is_silence(class) { 1 } else { copies.max(1) };
            classes.extend(std::iter::repeat_n(class, n));
            optional.extend(std::iter::repeat_n(opt, n));
            owner.extend(std::iter::repeat_n(s, n));
        }
        Ok((Self::new(classes, optional)?, owner))
    }

    /// The phone label of state `s`.
    pub fn label(&self, s: usize) -> &'static str {
        PHONES[self.classes[s] as usize]
    }

    /// States a path may enter `s` from (besides staying in `s`): `s − 1`, and further back
    /// across optional states.
    pub(crate) fn predecessors(&self, s: usize) -> impl Iterator<Item = usize> + '_ {
        let mut k = s;
        let mut open = true;
        std::iter::from_fn(move || {
            if !open || k == 0 {
                return None;
            }
            k -= 1;
            open = self.optional[k];
            Some(k)
        })
    }

    /// Whether a path may start in `s` (every state before it is optional).
    pub(crate) fn can_start(&self, s: usize) -> bool {
        self.optional[..s].iter().all(|&o| o)
    }

    /// Whether a path may end in `s` (every state after it is optional).
    pub(crate) fn can_end(&self, s: usize) -> bool {
        self.optional[s + 1..].iter().all(|&o| o)
    }
}

/// The class index of a canonical phone.
fn class_of(phone: &str) -> Result<u32, AlignError> {
    phone_index(phone)
        .map(|i| i as u32)
        .ok_or_else(|| AlignError::input("phone", format!("{phone:?} is not in the phone set")))
}

/// The class index of a phone label as an aligner or a TextGrid writes it (`sil`, `AH0`, `ax`).
///
/// # Errors
/// [`AlignError::InvalidInput`] naming the label.
pub fn class_of_label(label: &str) -> Result<u32, AlignError> {
    voxspec_data::normalize_phone(label)
        .ok_or_else(|| AlignError::input("phone", format!("unknown phone label {label:?}")))
        .and_then(class_of)
}

/// Whether `class` is silence.
pub fn is_silence(class: u32) -> bool {
    PHONES[class as usize] == SIL
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(t: &Topology) -> String {
        (0..t.len())
            .map(|s| {
                if t.optional[s] {
                    format!("[{}]", t.label(s))
                } else {
                    t.label(s).to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn pauses_follow_the_text_front_end() {
        let t = Topology::from_text("hello, old friend.").unwrap();
        assert_eq!(labels(&t), "SIL HH AH L OW SIL OW L D [SIL] F R EH N D SIL");
        assert_eq!(t.min_frames(), 15);
        // the required phones are exactly what synthesis feeds the model
        let required: Vec<&str> = (0..t.len())
            .filter(|&s| !t.optional[s])
            .map(|s| t.label(s))
            .collect();
        assert_eq!(required, g2p::g2p("hello, old friend.").unwrap());
    }

    #[test]
    fn predecessors_cross_optional_states() {
        let t = Topology::new(vec![0, 3, 0, 5, 6], vec![false, false, true, false, false]).unwrap();
        assert_eq!(t.predecessors(3).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(t.predecessors(1).collect::<Vec<_>>(), vec![0]);
        assert_eq!(t.predecessors(0).count(), 0);
        assert!(t.can_start(0) && !t.can_start(1));
        assert!(t.can_end(4) && !t.can_end(3));
    }

    #[test]
    fn bad_input_is_named() {
        assert!(Topology::from_text("...").is_err());
        assert!(Topology::new(vec![0], vec![true]).is_err());
        assert!(Topology::required(vec![99]).is_err());
        assert!(class_of_label("xyz").is_err());
        assert_eq!(class_of_label("pau").unwrap(), 0);
        assert_eq!(class_of_label("AH0").unwrap(), 3);
    }
}
