//! Utterance manifests: one JSON object per line.
//!
//! ```text
//! {"id":"1001_10_000123_000000","speaker":"1001","chapter":"10","path":"/abs/…/x.flac",
//!  "text":"The birch canoe slid on the smooth planks.","duration":2.64,"sample_rate":16000}
//! ```
//! `duration` is in seconds of the decoded audio; `sample_rate` is the file's native rate (models
//! resample on load); `path` is absolute unless the manifest was written with relative paths.
//! An utterance with a phone alignment (from a TextGrid) also carries
//! `"alignment":{"phones":["sil","DH","AH",…],"ends":[0.15,0.19,0.23,…]}` (seconds); the field
//! is left out when there is none, so manifests without alignments look as before.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;
use crate::textgrid::Alignment;

/// One utterance of a corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Utterance {
    /// Unique utterance id (LibriTTS: `<speaker>_<chapter>_<para>_<sent>`).
    pub id: String,
    /// Speaker id.
    pub speaker: String,
    /// Chapter (or session) id; empty when the layout has none.
    #[serde(default)]
    pub chapter: String,
    /// Audio file.
    pub path: String,
    /// Transcript (as found on disk; normalisation happens at tokenisation).
    pub text: String,
    /// Duration in seconds.
    pub duration: f64,
    /// Native sample rate of the file in Hz.
    pub sample_rate: u32,
    /// Phone alignment, when the corpus has one for this utterance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment: Option<Alignment>,
}

/// Reads a JSON-lines manifest; a malformed line is reported with its line number.
pub fn read_manifest(path: &Path) -> Result<Vec<Utterance>> {
    let file = std::fs::File::open(path).map_err(|e| DataError::io("opening", path, e))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| DataError::io("reading", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let utt: Utterance = serde_json::from_str(&line).map_err(|e| DataError::Manifest {
            path: path.to_path_buf(),
            line: i + 1,
            detail: e.to_string(),
        })?;
        if utt.id.is_empty() {
            return Err(DataError::Manifest {
                path: path.to_path_buf(),
                line: i + 1,
                detail: "empty id".into(),
            });
        }
        if let Some(a) = &utt.alignment
            && let Err(e) = a.check()
        {
            return Err(DataError::Manifest {
                path: path.to_path_buf(),
                line: i + 1,
                detail: format!("alignment of {:?}: {e}", utt.id),
            });
        }
        out.push(utt);
    }
    Ok(out)
}

/// Writes a JSON-lines manifest atomically.
pub fn write_manifest(path: &Path, utterances: &[Utterance]) -> Result<()> {
    let mut buf = String::new();
    for u in utterances {
        // Serialising a struct of strings and numbers cannot fail.
        let line = serde_json::to_string(u).map_err(|e| DataError::Manifest {
            path: path.to_path_buf(),
            line: 0,
            detail: e.to_string(),
        })?;
        buf.push_str(&line);
        buf.push('\n');
    }
    write_atomic(path, buf.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utt(id: &str) -> Utterance {
        Utterance {
            id: id.into(),
            speaker: "1".into(),
            chapter: "2".into(),
            path: "/x.wav".into(),
            text: "A \"quoted\" line.".into(),
            duration: 1.5,
            sample_rate: 16000,
            alignment: None,
        }
    }

    #[test]
    fn write_then_read_roundtrips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        let utts = vec![utt("a"), utt("b")];
        write_manifest(&p, &utts).unwrap();
        assert_eq!(read_manifest(&p).unwrap(), utts);
    }

    #[test]
    fn alignment_roundtrips_and_is_left_out_when_absent() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        let mut aligned = utt("b");
        aligned.alignment = Some(Alignment {
            phones: vec!["sil".into(), "AH".into(), "sil".into()],
            ends: vec![0.15, 0.4, 1.5],
        });
        let utts = vec![utt("a"), aligned];
        write_manifest(&p, &utts).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(!lines[0].contains("alignment"), "{}", lines[0]);
        assert!(
            lines[1].contains(r#""alignment":{"phones":["sil","AH","sil"],"ends":[0.15,0.4,1.5]}"#),
            "{}",
            lines[1]
        );
        assert_eq!(read_manifest(&p).unwrap(), utts);
    }

    #[test]
    fn old_manifest_lines_without_alignment_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        std::fs::write(
            &p,
            r#"{"id":"x","speaker":"1","chapter":"2","path":"/x.flac","text":"t","duration":2.0,"sample_rate":16000}"#,
        )
        .unwrap();
        let utts = read_manifest(&p).unwrap();
        assert_eq!(utts.len(), 1);
        assert_eq!(utts[0].alignment, None);
    }

    #[test]
    fn inconsistent_alignment_is_reported_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        let good = serde_json::to_string(&utt("a")).unwrap();
        let bad = good.replace(
            r#""sample_rate":16000"#,
            r#""sample_rate":16000,"alignment":{"phones":["A","B"],"ends":[0.5]}"#,
        );
        assert_ne!(bad, good);
        std::fs::write(&p, format!("{good}\n{bad}\n")).unwrap();
        let err = read_manifest(&p).unwrap_err().to_string();
        assert!(
            err.contains("m.jsonl:2") && err.contains("2 phones but 1 end times"),
            "{err}"
        );
    }

    #[test]
    fn malformed_line_is_reported_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        let good = serde_json::to_string(&utt("a")).unwrap();
        std::fs::write(&p, format!("{good}\n{{\"id\": 3}}\n")).unwrap();
        let err = read_manifest(&p).unwrap_err().to_string();
        assert!(err.contains("m.jsonl:2"), "{err}");
    }
}
