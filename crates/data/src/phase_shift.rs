//! Phase-shifted token grids: data augmentation for codecs whose frames are longer than their
//! teacher's.
//!
//! A SoCodec at 120 ms reads 20 ms teacher frames and emits one token frame per six of them,
//! so a corpus of T teacher frames gives T/6 training frames, always cut on the same grid.
//! Dropping the first s teacher frames before encoding (s = 1..5) cuts the same speech on the
//! five other grids: different tokens for the same phones, each as real as the first. `codec
//! extract --phase-shifts N` stores the training split's shifted encodings as `<id>@<ms>ms`
//! beside `<id>`, and `train multistream` adds each as a training utterance whose phone
//! alignment is moved by the same amount ([`shift_alignment`]). Dev and test are never shifted.

use std::collections::HashMap;

use crate::manifest::Utterance;
use crate::textgrid::Alignment;
use crate::token_store::TokenStore;

/// The token-store id of `id` encoded with its first `ms` milliseconds dropped.
pub fn shifted_id(id: &str, ms: u32) -> String {
    format!("{id}@{ms}ms")
}

/// `alignment` as seen from `seconds` into the recording: every end moves back by `seconds`,
/// the phones that end by then are dropped, and the first remaining phone starts at 0. `None`
/// when no phone is left.
pub fn shift_alignment(alignment: &Alignment, seconds: f64) -> Option<Alignment> {
    let first = alignment.ends.iter().position(|&e| e - seconds > 1e-9)?;
    Some(Alignment {
        phones: alignment.phones[first..].to_vec(),
        ends: alignment.ends[first..]
            .iter()
            .map(|e| e - seconds)
            .collect(),
    })
}

/// Shift of the training utterance `u` by `ms` milliseconds, as a manifest entry of its own
/// (`id` [`shifted_id`], alignment [`shift_alignment`], duration shortened); `None` when it has
/// no alignment or nothing is left of it.
pub fn shifted_utterance(u: &Utterance, ms: u32) -> Option<Utterance> {
    let seconds = f64::from(ms) / 1000.0;
    let alignment = shift_alignment(u.alignment.as_ref()?, seconds)?;
    Some(Utterance {
        id: shifted_id(&u.id, ms),
        alignment: Some(alignment),
        duration: (u.duration - seconds).max(0.0),
        ..u.clone()
    })
}

/// The recording `id` was cut from and the shift in ms, for a [`shifted_id`]; else `None`.
pub fn parse_shifted(id: &str) -> Option<(&str, u32)> {
    let (base, shift) = id.rsplit_once('@')?;
    let digits = shift.strip_suffix("ms")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, digits.parse().ok()?))
}

/// The recording `id` was cut from: `id` without a [`shifted_id`] suffix.
pub fn base_id(id: &str) -> &str {
    parse_shifted(id).map_or(id, |(base, _)| base)
}

/// The manifest entries of the shifted encodings that `store` holds for the utterances of
/// `train` (see the module docs), in the order of `train`, then of the shift.
pub fn shifted_utterances(train: &[Utterance], store: &TokenStore) -> Vec<Utterance> {
    let mut shifts: HashMap<&str, Vec<u32>> = HashMap::new();
    for id in store.ids() {
        if let Some((base, ms)) = parse_shifted(id) {
            shifts.entry(base).or_default().push(ms);
        }
    }
    let mut out = Vec::new();
    for u in train {
        let Some(ms) = shifts.get_mut(u.id.as_str()) else {
            continue;
        };
        ms.sort_unstable();
        out.extend(ms.iter().filter_map(|&ms| shifted_utterance(u, ms)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alignment() -> Alignment {
        Alignment {
            phones: ["sil", "DH", "AH", "sil"].map(String::from).to_vec(),
            ends: vec![0.05, 0.13, 0.30, 0.50],
        }
    }

    #[test]
    fn shifting_moves_every_end_and_drops_the_phones_already_over() {
        let a = shift_alignment(&alignment(), 0.02).expect("phones left");
        assert_eq!(a.phones, alignment().phones);
        for (got, want) in a.ends.iter().zip([0.03, 0.11, 0.28, 0.48]) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        // 60 ms: the leading silence (ends at 50 ms) is over, DH is cut to its last 70 ms.
        let a = shift_alignment(&alignment(), 0.06).expect("phones left");
        assert_eq!(a.phones, ["DH", "AH", "sil"]);
        assert!((a.ends[0] - 0.07).abs() < 1e-12);
        // A phone ending exactly at the shift is over too.
        let a = shift_alignment(&alignment(), 0.13).expect("phones left");
        assert_eq!(a.phones, ["AH", "sil"]);
        assert!(shift_alignment(&alignment(), 0.5).is_none());
        // No shift, no change.
        assert_eq!(shift_alignment(&alignment(), 0.0), Some(alignment()));
    }

    #[test]
    fn shifted_ids_name_their_recording() {
        let id = shifted_id("1001_134708_000013_000000", 40);
        assert_eq!(id, "1001_134708_000013_000000@40ms");
        assert_eq!(base_id(&id), "1001_134708_000013_000000");
        assert_eq!(base_id("plain_id"), "plain_id");
        // Only the exact suffix counts.
        assert_eq!(base_id("a@b"), "a@b");
        assert_eq!(base_id("a@ms"), "a@ms");
        assert_eq!(base_id("a@4x0ms"), "a@4x0ms");
        assert_eq!(parse_shifted(&id), Some(("1001_134708_000013_000000", 40)));
        assert_eq!(parse_shifted("x@y@100ms"), Some(("x@y", 100)));
        assert_eq!(parse_shifted("plain"), None);
    }

    #[test]
    fn a_shifted_utterance_keeps_the_rest_of_its_entry() {
        let u = Utterance {
            id: "u1".into(),
            speaker: "s".into(),
            chapter: String::new(),
            path: "a.wav".into(),
            text: "the".into(),
            duration: 0.5,
            sample_rate: 16_000,
            alignment: Some(alignment()),
        };
        let s = shifted_utterance(&u, 60).expect("shifted");
        assert_eq!(s.id, "u1@60ms");
        assert_eq!((s.path.as_str(), s.speaker.as_str()), ("a.wav", "s"));
        assert!((s.duration - 0.44).abs() < 1e-12);
        assert_eq!(s.alignment.expect("alignment").phones.len(), 3);
        let plain = Utterance {
            alignment: None,
            ..u
        };
        assert!(shifted_utterance(&plain, 20).is_none());
    }
}
