//! A phone-identity teacher: frame features read from a forced alignment instead of computed
//! from audio. Each frame is the code of the phone the alignment says it speaks: a fixed ±1/√D
//! vector per phone (of `voxspec_data::PHONES`, silence first), drawn once from a seeded
//! generator, so every one of the D dimensions changes with the phone. (SpeechTokenizer's
//! distillation loss takes, per dimension, the cosine over time: a one-hot dimension whose
//! phone a segment never speaks would be all zeros there and teach nothing.) Two different
//! phones' codes are nearly orthogonal for D in the hundreds.
//!
//! As the distillation target of a codec's first quantizer it asks RVQ-1 to encode exactly what
//! a text-to-speech LM is conditioned on, the phone sequence, on a corpus where a recogniser
//! trained elsewhere hears its speaker poorly (`voxspec align` makes the alignments).

use std::path::Path;

use voxspec_data::{Alignment, PHONES, Utterance, alignment_frames, normalize_phone};

use crate::error::TeacherError;
use crate::feature_store::{FeatureStoreMeta, FeatureStoreWriter, Features};

/// The `teacher` metadata value of a phone-identity feature store.
pub const PHONES_KIND: &str = "phones";

/// Phones a frame can speak: the width of the one-hot vectors before padding.
pub const PHONE_DIM: usize = PHONES.len();

/// The code of phone `index` (of `voxspec_data::PHONES`), `dim` values of ±1/√dim: bit `d` of a
/// SplitMix64 stream seeded by the phone, so the codes never change between runs.
pub fn phone_code(index: usize, dim: usize) -> Vec<f32> {
    let scale = 1.0 / (dim as f32).sqrt();
    let mut state = 0x5EED_0000_0000_0000u64 ^ index as u64;
    let mut word = 0u64;
    (0..dim)
        .map(|d| {
            if d % 64 == 0 {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                word = z ^ (z >> 31);
            }
            if (word >> (d % 64)) & 1 == 1 {
                scale
            } else {
                -scale
            }
        })
        .collect()
}

/// Phone-code features ([`phone_code`]) of `alignment` at `frame_rate` Hz, `dim ≥ PHONE_DIM`
/// wide; the frame count is the alignment's end time in frames (rounded).
///
/// # Errors
/// [`TeacherError::InvalidInput`] for `dim` below [`PHONE_DIM`], a phone label that is not
/// ARPAbet or silence, or end times that are not a valid alignment.
pub fn phone_features(
    alignment: &Alignment,
    frame_rate: f64,
    dim: usize,
) -> Result<Features, TeacherError> {
    let bad = |reason: String| TeacherError::InvalidInput {
        what: "phone alignment",
        reason,
    };
    if dim < PHONE_DIM {
        return Err(bad(format!(
            "phone features need at least {PHONE_DIM} dimensions, {dim} asked"
        )));
    }
    let last = alignment.ends.last().copied().unwrap_or(0.0);
    let frames = (last * frame_rate).round().max(0.0) as usize;
    let durations = alignment_frames(&alignment.ends, frame_rate, frames).map_err(bad)?;
    let codes: Vec<Vec<f32>> = (0..PHONE_DIM).map(|p| phone_code(p, dim)).collect();
    let mut data = Vec::with_capacity(frames * dim);
    for (label, &d) in alignment.phones.iter().zip(&durations) {
        let index = normalize_phone(label)
            .and_then(|p| PHONES.iter().position(|q| *q == p))
            .ok_or_else(|| bad(format!("phone {label:?} is not ARPAbet or silence")))?;
        for _ in 0..d {
            data.extend_from_slice(&codes[index]);
        }
    }
    Ok(Features { frames, dim, data })
}

/// The metadata of a phone-code feature store ([`PHONES_KIND`], layer `code`): `dim` values
/// per frame at `frame_rate` Hz, for a codec reading audio at `sample_rate` Hz.
pub fn phones_meta(dim: usize, frame_rate: f32, sample_rate: u32) -> FeatureStoreMeta {
    FeatureStoreMeta {
        dim,
        frame_rate,
        sample_rate,
        teacher: PHONES_KIND.into(),
        layer: "code".into(),
    }
}

/// What writing one split's phone features did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhoneSplit {
    /// Utterances whose features were written now.
    pub written: usize,
    /// Utterances left out: no alignment in the manifest.
    pub unaligned: usize,
    /// Feature frames written now.
    pub frames: usize,
}

/// Writes the phone features ([`phone_features`] at `meta`'s rate and width) of every aligned
/// utterance of `utterances` (the manifest `manifest` of `split`) not yet in the store `out`.
///
/// # Errors
/// [`TeacherError::Utterance`] naming the utterance and manifest whose alignment is unusable;
/// the store's errors.
pub fn write_phone_split(
    (out, split): (&Path, &str),
    meta: &FeatureStoreMeta,
    utterances: &[Utterance],
    manifest: &Path,
) -> Result<PhoneSplit, TeacherError> {
    let mut writer = FeatureStoreWriter::new(out, split, meta.clone(), 100_000)?;
    let (mut written, mut unaligned, mut frames) = (0usize, 0usize, 0usize);
    for u in utterances {
        let Some(alignment) = &u.alignment else {
            unaligned += 1;
            continue;
        };
        if writer.contains(&u.id) {
            continue;
        }
        let f = phone_features(alignment, f64::from(meta.frame_rate), meta.dim).map_err(|e| {
            TeacherError::Utterance {
                id: u.id.clone(),
                manifest: manifest.to_path_buf(),
                source: Box::new(e),
            }
        })?;
        frames += f.frames;
        writer.push(&u.id, f)?;
        written += 1;
    }
    writer.finish()?;
    Ok(PhoneSplit {
        written,
        unaligned,
        frames,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_phones_codes_in_alignment_order() {
        // sil 0–0.1 s, AH 0.1–0.14 s, T 0.14–0.2 s at 50 Hz: 5, 2, 3 frames.
        let a = Alignment {
            phones: vec!["sil".into(), "AH0".into(), "t".into()],
            ends: vec![0.1, 0.14, 0.2],
        };
        let dim = 144;
        let f = phone_features(&a, 50.0, dim).unwrap();
        assert_eq!((f.frames, f.dim), (10, dim));
        let (sil, ah, t) = (0, 3, 31);
        assert_eq!((PHONES[ah], PHONES[t]), ("AH", "T"));
        let want = [sil, sil, sil, sil, sil, ah, ah, t, t, t];
        for (row, &p) in f.data.chunks_exact(dim).zip(&want) {
            assert_eq!(row, phone_code(p, dim).as_slice());
        }
    }

    #[test]
    fn phone_codes_are_unit_fixed_and_nearly_orthogonal() {
        let dim = 144;
        let codes: Vec<Vec<f32>> = (0..PHONE_DIM).map(|p| phone_code(p, dim)).collect();
        assert_eq!(codes[7], phone_code(7, dim));
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        for (i, a) in codes.iter().enumerate() {
            assert!((dot(a, a) - 1.0).abs() < 1e-5);
            for b in &codes[i + 1..] {
                // ±1/√144 entries: |cos| ≤ 0.35 holds with room for every pair of 40.
                assert!(dot(a, b).abs() < 0.35, "phones {i}: {}", dot(a, b));
            }
        }
    }

    fn utterance(id: &str, alignment: Option<Alignment>) -> Utterance {
        Utterance {
            id: id.into(),
            speaker: "s".into(),
            chapter: String::new(),
            path: format!("{id}.wav"),
            text: "a".into(),
            duration: 0.2,
            sample_rate: 16_000,
            alignment,
        }
    }

    #[test]
    fn a_split_is_written_once_and_unaligned_utterances_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let a = Alignment {
            phones: vec!["sil".into(), "AH0".into()],
            ends: vec![0.1, 0.2],
        };
        let utts = [utterance("a", Some(a.clone())), utterance("b", None)];
        let meta = phones_meta(PHONE_DIM, 50.0, 16_000);
        let manifest = Path::new("train.jsonl");
        let first = write_phone_split((dir.path(), "train"), &meta, &utts, manifest).unwrap();
        assert_eq!((first.written, first.unaligned, first.frames), (1, 1, 10));
        let again = write_phone_split((dir.path(), "train"), &meta, &utts, manifest).unwrap();
        assert_eq!((again.written, again.unaligned, again.frames), (0, 1, 0));

        let bad = Alignment {
            phones: vec!["QQ".into()],
            ends: vec![0.1],
        };
        let err = write_phone_split(
            (dir.path(), "dev"),
            &meta,
            &[utterance("c", Some(bad))],
            manifest,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("utterance c of train.jsonl"), "{err}");
    }

    #[test]
    fn bad_labels_and_widths_are_refused() {
        let a = Alignment {
            phones: vec!["sil".into(), "QQ".into()],
            ends: vec![0.1, 0.2],
        };
        let err = phone_features(&a, 50.0, 40).unwrap_err().to_string();
        assert!(err.contains("\"QQ\""), "{err}");
        let err = phone_features(&a, 50.0, 8).unwrap_err().to_string();
        assert!(err.contains("at least 40"), "{err}");
    }
}
