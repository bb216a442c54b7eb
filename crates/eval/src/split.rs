//! The split under evaluation: its utterances and the forced-choice candidates (every
//! transcript of the split, also the independent recogniser's candidates).

use std::path::{Path, PathBuf};

use voxspec_data::{Utterance, read_manifest};
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, LengthNorm};

use crate::error::{EvalError, Result};

/// One-line definition of the MCD written into the reports.
pub const MCD_DEFINITION: &str = "MFCC-based MCD (not SPTK mcep): orthonormal DCT-II of natural-log \
    mel magnitude frames (25 ms Hann, 10 ms hop, 80 Slaney bands), c0 dropped, c1..=cK kept; \
    per frame (10/ln10)*sqrt(2*sum_k (c_ref-c_syn)^2) dB, averaged over index-aligned frames \
    (shorter signal), then over utterances";

/// The utterances of `<data>/<split>.jsonl` under evaluation.
#[derive(Debug)]
pub struct EvalSplit {
    /// The split's name.
    pub name: String,
    /// Its manifest.
    pub manifest: PathBuf,
    /// The utterances evaluated: the first `limit` of the manifest.
    pub utterances: Vec<Utterance>,
    /// Forced choice among every transcript of the split (before `limit` cut it).
    pub candidates: ForcedChoice,
    /// Every transcript of the split, in manifest order.
    pub texts: Vec<String>,
}

impl EvalSplit {
    /// Reads the split and builds its candidates with `teacher`'s tokenizer.
    ///
    /// # Errors
    /// [`EvalError::Data`] when the manifest cannot be read; [`EvalError::Input`] when a
    /// transcript cannot be a candidate or no utterance is left.
    pub fn read(
        data: &Path,
        split: &str,
        limit: Option<usize>,
        teacher: &CtcTeacher,
    ) -> Result<Self> {
        let manifest = data.join(format!("{split}.jsonl"));
        let mut utterances = read_manifest(&manifest)?;
        let candidates = ForcedChoice::new(
            teacher.tokenizer(),
            utterances.iter().map(|u| u.text.as_str()),
            LengthNorm::default(),
        )
        .map_err(|e| {
            EvalError::input(format!(
                "the candidate sentences of {}: {e}",
                manifest.display()
            ))
        })?;
        let texts = utterances.iter().map(|u| u.text.clone()).collect();
        if let Some(n) = limit {
            utterances.truncate(n);
        }
        if utterances.is_empty() {
            return Err(EvalError::input(format!(
                "{} has no utterances",
                manifest.display()
            )));
        }
        Ok(Self {
            name: split.to_string(),
            manifest,
            utterances,
            candidates,
            texts,
        })
    }

    /// The candidate index of `u`'s own transcript.
    ///
    /// # Errors
    /// [`EvalError::Input`] when it is not a candidate; the tokenizer's errors.
    pub fn own(&self, teacher: &CtcTeacher, u: &Utterance) -> Result<usize> {
        self.candidates
            .position(teacher.tokenizer(), &u.text)?
            .ok_or_else(|| EvalError::input(format!("utterance {} is not a candidate", u.id)))
    }

    /// Writes the candidates, one per line, to `<dir>/candidates.txt` for the independent
    /// recogniser, and returns that path.
    ///
    /// # Errors
    /// As [`crate::judge::write_candidates`].
    pub fn write_candidates(&self, dir: &Path) -> Result<PathBuf> {
        let path = dir.join("candidates.txt");
        crate::judge::write_candidates(&path, self.texts.iter().map(String::as_str))?;
        Ok(path)
    }
}

/// `audio` at `rate` (unchanged when it already is).
///
/// # Errors
/// [`EvalError::Audio`] when it cannot be resampled.
pub fn at_rate(audio: &voxspec_audio::Audio, rate: u32) -> Result<Vec<f32>> {
    if audio.sample_rate == rate {
        return Ok(audio.samples.clone());
    }
    Ok(voxspec_audio::resample(
        &audio.samples,
        audio.sample_rate,
        rate,
    )?)
}

/// Writes `report` as pretty JSON to `path`, atomically.
///
/// # Errors
/// [`EvalError::Json`] or [`EvalError::Data`] naming the file.
pub fn write_report(path: &Path, report: &impl serde::Serialize) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(report).map_err(|source| EvalError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    voxspec_data::write_atomic(path, &bytes)?;
    Ok(())
}

/// Writes `report` as pretty JSON to `path`, atomically, with the keys of every object (nested
/// ones too) in alphabetical order, whatever the order of the struct fields.
///
/// # Errors
/// [`EvalError::Json`] or [`EvalError::Data`] naming the file.
pub fn write_report_sorted(path: &Path, report: &impl serde::Serialize) -> Result<()> {
    let json = |source| EvalError::Json {
        path: path.to_path_buf(),
        source,
    };
    // `serde_json::Value` keeps object keys in a sorted map.
    let value = serde_json::to_value(report).map_err(json)?;
    let bytes = serde_json::to_vec_pretty(&value).map_err(json)?;
    voxspec_data::write_atomic(path, &bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Inner {
        zeta: u8,
        alpha: u8,
    }

    #[derive(serde::Serialize)]
    struct Outer {
        rows: Vec<Inner>,
        beta: f32,
    }

    #[test]
    fn sorted_reports_order_every_object_alphabetically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let report = Outer {
            rows: vec![Inner { zeta: 1, alpha: 2 }],
            beta: 0.5,
        };
        write_report_sorted(&path, &report).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let at = |k: &str| text.find(k).unwrap();
        assert!(at("\"beta\"") < at("\"rows\""), "{text}");
        assert!(at("\"alpha\"") < at("\"zeta\""), "{text}");
    }
}
