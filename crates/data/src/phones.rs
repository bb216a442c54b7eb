//! The phone set of voxspec's phonemic text front end: `SIL` plus the 39 ARPAbet phones of
//! CMUdict without stress marks.
//!
//! Three sources spell phones differently and all map onto [`PHONES`] through
//! [`normalize_phone`]:
//! - CMUdict and Montreal-Forced-Aligner write upper-case ARPAbet with a stress digit (`AH0`,
//!   `EY1`); the digit is dropped.
//! - flite / festival's `cmu_us` ("radio") phone set writes lower-case names (`hh`, `ax`) and a
//!   few extra phones with no CMUdict counterpart: `ax` → `AH`, `axr` → `ER`, `el` → `L`,
//!   `em` → `M`, `en` → `N`, `nx` → `N` (each kept as one phone so that alignment durations
//!   stay one-to-one with phone labels).
//! - Silences and pauses from any aligner (`""`, `sil`, `sp`, `spn`, `pau`, `<eps>`) → `SIL`.

/// The silence / pause phone (index 0 of [`PHONES`]).
pub const SIL: &str = "SIL";

/// The phone inventory in id order: `SIL`, then the 39 stress-free ARPAbet phones
/// alphabetically.
pub const PHONES: [&str; 40] = [
    SIL, "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G",
    "HH", "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH",
    "UH", "UW", "V", "W", "Y", "Z", "ZH",
];

/// Labels that mean silence or a pause in the aligners and dictionaries voxspec reads.
const SILENCES: [&str; 7] = ["", "sil", "sp", "spn", "pau", "<eps>", "silence"];

/// flite / festival `cmu_us` phones that have no identically named ARPAbet phone.
const FLITE_EXTRA: [(&str, &str); 6] = [
    ("ax", "AH"),
    ("axr", "ER"),
    ("el", "L"),
    ("em", "M"),
    ("en", "N"),
    ("nx", "N"),
];

/// Index of `phone` in [`PHONES`], for a phone already in canonical form (`"AH"`, not `"ah0"`).
pub fn phone_index(phone: &str) -> Option<usize> {
    PHONES.iter().position(|p| *p == phone)
}

/// Maps an aligner or dictionary phone label onto [`PHONES`].
///
/// Case-insensitive; surrounding whitespace and a trailing stress digit are ignored (`ah0`,
/// `AH1` → `AH`); silence labels (`""`, `sil`, `sp`, `spn`, `pau`, `<eps>`) → `SIL`; flite's
/// extra phones are folded as the module documentation lists. Anything else → `None`.
pub fn normalize_phone(label: &str) -> Option<&'static str> {
    let lower = label.trim().to_ascii_lowercase();
    if SILENCES.contains(&lower.as_str()) {
        return Some(SIL);
    }
    let base = lower.trim_end_matches(|c: char| c.is_ascii_digit());
    // A label that was only digits ("0") is not a phone.
    if base.is_empty() {
        return None;
    }
    if let Some((_, p)) = FLITE_EXTRA.iter().find(|(f, _)| *f == base) {
        return Some(p);
    }
    PHONES
        .iter()
        .skip(1)
        .find(|p| p.eq_ignore_ascii_case(base))
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventory_is_sil_plus_39_distinct_arpabet_phones() {
        assert_eq!(PHONES[0], SIL);
        let mut sorted = PHONES[1..].to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 39);
        assert_eq!(
            sorted,
            PHONES[1..].to_vec(),
            "phones are listed alphabetically"
        );
        for (i, p) in PHONES.iter().enumerate() {
            assert_eq!(phone_index(p), Some(i));
            assert_eq!(
                normalize_phone(p),
                Some(*p),
                "canonical names map to themselves"
            );
        }
    }

    #[test]
    fn stress_digits_and_case_are_ignored() {
        assert_eq!(normalize_phone("AH0"), Some("AH"));
        assert_eq!(normalize_phone("ey1"), Some("EY"));
        assert_eq!(normalize_phone("Ow2"), Some("OW"));
        assert_eq!(normalize_phone(" zh "), Some("ZH"));
        assert_eq!(normalize_phone("ER0"), Some("ER"));
    }

    #[test]
    fn silence_labels_become_sil() {
        for s in ["", "sil", "SIL", "sp", "SPN", "pau", "<eps>", "  "] {
            assert_eq!(normalize_phone(s), Some(SIL), "{s:?}");
        }
    }

    #[test]
    fn flite_phone_set_maps_onto_arpabet() {
        // The complete cmu_us phone set of flite (festival's "radio" names).
        let flite = [
            "aa", "ae", "ah", "ao", "aw", "ax", "axr", "ay", "b", "ch", "d", "dh", "eh", "el",
            "em", "en", "er", "ey", "f", "g", "hh", "ih", "iy", "jh", "k", "l", "m", "n", "nx",
            "ng", "ow", "oy", "p", "r", "s", "sh", "t", "th", "uh", "uw", "v", "w", "y", "z", "zh",
            "pau",
        ];
        for f in flite {
            assert!(normalize_phone(f).is_some(), "flite phone {f} unmapped");
        }
        assert_eq!(normalize_phone("ax"), Some("AH"));
        assert_eq!(normalize_phone("axr"), Some("ER"));
        assert_eq!(normalize_phone("el"), Some("L"));
        assert_eq!(normalize_phone("em"), Some("M"));
        assert_eq!(normalize_phone("en"), Some("N"));
        assert_eq!(normalize_phone("nx"), Some("N"));
        assert_eq!(normalize_phone("hh"), Some("HH"));
    }

    #[test]
    fn unknown_labels_are_none() {
        for s in ["x", "AHH", "0", "1", "ah-", "a", "ü", "<unk>"] {
            assert_eq!(normalize_phone(s), None, "{s:?}");
        }
    }
}
