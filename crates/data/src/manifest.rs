//! Utterance manifests: one JSON object per line.
//!
//! ```text
//! {"id":"1001_10_000123_000000","speaker":"1001","chapter":"10","path":"/abs/…/x.flac",
//!  "text":"The birch canoe slid on the smooth planks.","duration":2.64,"sample_rate":16000}
//! ```
//! `duration` is in seconds of the decoded audio; `sample_rate` is the file's native rate (models
//! resample on load); `path` is absolute unless the manifest was written with relative paths.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;

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
    fn malformed_line_is_reported_with_its_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.jsonl");
        let good = serde_json::to_string(&utt("a")).unwrap();
        std::fs::write(&p, format!("{good}\n{{\"id\": 3}}\n")).unwrap();
        let err = read_manifest(&p).unwrap_err().to_string();
        assert!(err.contains("m.jsonl:2"), "{err}");
    }
}
