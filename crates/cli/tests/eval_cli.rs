//! `voxspec eval intelligibility` with the shipped CTC teacher on a few test-clean clips: the
//! JSON report, a deliberately wrong pairing that must fail, and clear input errors.

use crate::common;

use std::path::{Path, PathBuf};

use common::{text, voxspec};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Speaker 1006, chapter 61 of test-clean: `(flac, normalized transcript)` of the first `n`.
fn clips(n: usize) -> Vec<(PathBuf, String)> {
    let dir = repo().join("datasets/minitts/test-clean/1006/61");
    let mut flacs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "flac"))
        .collect();
    flacs.sort();
    flacs
        .into_iter()
        .take(n)
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            let t = std::fs::read_to_string(p.with_file_name(format!("{stem}.normalized.txt")));
            (p, t.unwrap())
        })
        .collect()
}

/// Copies the clips into `dir` as `<i>.flac` with `<i>.txt` holding `texts[i]`.
fn clip_dir(dir: &Path, clips: &[(PathBuf, String)], texts: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, ((flac, _), t)) in clips.iter().zip(texts).enumerate() {
        std::fs::copy(flac, dir.join(format!("{i}.flac"))).unwrap();
        std::fs::write(dir.join(format!("{i}.txt")), t).unwrap();
    }
}

#[test]
fn identifies_clips_and_fails_on_a_wrong_pairing() {
    let tmp = tempfile::tempdir().unwrap();
    let teacher = repo().join("checkpoints/ctc-minitts");
    let teacher = teacher.to_str().unwrap();
    let clips = clips(4);
    assert_eq!(clips.len(), 4);
    let texts: Vec<&str> = clips.iter().map(|c| c.1.as_str()).collect();

    let right = tmp.path().join("right");
    clip_dir(&right, &clips, &texts);
    let out = tmp.path().join("right.json");
    let o = voxspec(&[
        "eval",
        "intelligibility",
        "--dir",
        right.to_str().unwrap(),
        "--teacher",
        teacher,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("| clips | candidates | identified"),
        "{}",
        text(&o)
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["summary"]["clips"], 4);
    assert_eq!(r["summary"]["candidates"], 4);
    assert_eq!(r["summary"]["chance"], 0.25);
    assert_eq!(r["summary"]["identified"], 4, "{r}");
    assert!(r["summary"]["cer"].as_f64().unwrap() > 0.0);
    for c in r["clips"].as_array().unwrap() {
        assert_eq!(c["rank"], 1, "{c}");
        assert_eq!(c["own_text"], c["best_text"]);
        assert!(c["own_score"].as_f64().is_some());
    }

    // Transcripts rotated by one: every clip claims another clip's sentence.
    let rotated: Vec<&str> = (0..4).map(|i| texts[(i + 1) % 4]).collect();
    let wrong = tmp.path().join("wrong");
    clip_dir(&wrong, &clips, &rotated);
    let out = tmp.path().join("wrong.json");
    let o = voxspec(&[
        "eval",
        "intelligibility",
        "--dir",
        wrong.to_str().unwrap(),
        "--teacher",
        teacher,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(r["summary"]["identified"], 0, "{r}");

    // A candidate file that lacks a clip's transcript, and a clip without a transcript.
    let cands = tmp.path().join("cands.txt");
    std::fs::write(&cands, format!("{}\n{}\n", texts[0], texts[1])).unwrap();
    let o = voxspec(&[
        "eval",
        "intelligibility",
        "--dir",
        right.to_str().unwrap(),
        "--teacher",
        teacher,
        "--candidates",
        cands.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("not among the 2 candidates"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(right.join("3.txt")).unwrap();
    let o = voxspec(&[
        "eval",
        "intelligibility",
        "--dir",
        right.to_str().unwrap(),
        "--teacher",
        teacher,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("3.txt") && !text(&o).contains("panicked"),
        "{}",
        text(&o)
    );
}

#[test]
fn help_explains_the_measure() {
    let o = voxspec(&["eval", "intelligibility", "--help"]);
    assert!(o.status.success());
    assert!(text(&o).contains("chance"), "{}", text(&o));
    let o = voxspec(&[
        "eval",
        "intelligibility",
        "--teacher",
        "/no/such/teacher",
        "--dir",
        ".",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("/no/such/teacher"), "{}", text(&o));
}
