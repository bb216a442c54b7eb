//! How far an alignment's phone boundaries lie from a reference's: every non-silence phone's
//! start and end, compared where both alignments have the same non-silence phone sequence
//! (the standard measure of forced aligners: mean absolute boundary error and the share within
//! a tolerance, 20 ms by convention).

use serde::Serialize;
use voxspec_data::Alignment;

use crate::topology::{class_of_label, is_silence};

/// Non-silence phones of an alignment as (class, start, end); `None` for an unknown label.
fn speech_phones(a: &Alignment) -> Option<Vec<(u32, f64, f64)>> {
    let starts = a.starts();
    let mut out = Vec::new();
    for ((label, &s), &e) in a.phones.iter().zip(&starts).zip(&a.ends) {
        let class = class_of_label(label).ok()?;
        if !is_silence(class) {
            out.push((class, s, e));
        }
    }
    Some(out)
}

/// Boundary errors accumulated over utterances.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BoundaryErrors {
    /// Utterances compared (same non-silence phone sequence).
    pub utterances: usize,
    /// Utterances skipped because the phone sequences differ.
    pub mismatched: usize,
    /// Boundaries compared (two per non-silence phone).
    pub boundaries: usize,
    /// Sum of absolute errors, seconds.
    pub abs_error_sum: f64,
    /// Boundaries within 10, 20, 50 ms.
    pub within_10ms: usize,
    /// Boundaries within 20 ms.
    pub within_20ms: usize,
    /// Boundaries within 50 ms.
    pub within_50ms: usize,
}

impl BoundaryErrors {
    /// Adds one utterance; returns false (and counts a mismatch) when the non-silence phone
    /// sequences differ.
    pub fn add(&mut self, hypothesis: &Alignment, reference: &Alignment) -> bool {
        let (Some(h), Some(r)) = (speech_phones(hypothesis), speech_phones(reference)) else {
            self.mismatched += 1;
            return false;
        };
        if h.len() != r.len() || h.iter().zip(&r).any(|(a, b)| a.0 != b.0) {
            self.mismatched += 1;
            return false;
        }
        self.utterances += 1;
        for (a, b) in h.iter().zip(&r) {
            for err in [(a.1 - b.1).abs(), (a.2 - b.2).abs()] {
                self.boundaries += 1;
                self.abs_error_sum += err;
                // A hair of slack for times written with six decimals.
                self.within_10ms += usize::from(err <= 0.010 + 1e-6);
                self.within_20ms += usize::from(err <= 0.020 + 1e-6);
                self.within_50ms += usize::from(err <= 0.050 + 1e-6);
            }
        }
        true
    }

    /// Mean absolute boundary error in seconds (0 when nothing was compared).
    pub fn mean_abs_error(&self) -> f64 {
        self.abs_error_sum / self.boundaries.max(1) as f64
    }

    /// Share of boundaries within 20 ms.
    pub fn share_within_20ms(&self) -> f64 {
        self.within_20ms as f64 / self.boundaries.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(phones: &[&str], ends: &[f64]) -> Alignment {
        Alignment {
            phones: phones.iter().map(|p| p.to_string()).collect(),
            ends: ends.to_vec(),
        }
    }

    #[test]
    fn errors_are_measured_on_speech_phones_only() {
        let reference = a(&["sil", "AH", "B", "sil"], &[0.10, 0.20, 0.30, 0.50]);
        // the same phones, one boundary 30 ms late, silences labelled another way
        let hyp = a(&["pau", "AH0", "B", "SIL"], &[0.10, 0.23, 0.30, 0.50]);
        let mut e = BoundaryErrors::default();
        assert!(e.add(&hyp, &reference));
        assert_eq!(e.boundaries, 4);
        assert_eq!(e.within_20ms, 2); // AH's end and B's start are 30 ms off
        assert!((e.mean_abs_error() - 0.015).abs() < 1e-9);
        // a different phone sequence is not compared
        let other = a(&["sil", "AH", "P", "sil"], &[0.1, 0.2, 0.3, 0.5]);
        assert!(!e.add(&other, &reference));
        assert_eq!((e.utterances, e.mismatched), (1, 1));
    }
}
