//! Helpers shared by the binary's integration tests: run `voxspec`, check exits, and make small
//! inputs (a slice of the bundled corpus, a tiny codec and CTC teacher).
// Each test binary uses a different subset of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

pub fn voxspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_voxspec"))
        .args(args)
        // The independent recogniser (Python) is not part of these tests, even where a
        // developer has set it up.
        .env("VOXSPEC_NO_ASR", "1")
        .output()
        .expect("the voxspec binary runs")
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn ok(args: &[&str]) -> String {
    let o = voxspec(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    text(&o)
}

/// Runs a command that must fail cleanly: exit code 1 and no panic.
pub fn fail(args: &[&str]) -> String {
    let o = voxspec(args);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
    assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    text(&o)
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

pub fn minitts() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../datasets/minitts")
        .to_string_lossy()
        .into_owned()
}

/// Prepared manifests of the bundled corpus, cut to `n` utterances per split.
pub fn prepared(dir: &Path, n: usize) -> PathBuf {
    let data = dir.join("data");
    ok(&[
        "prepare",
        "--corpus",
        &minitts(),
        "--out",
        s(&data),
        "--header-only",
    ]);
    for split in ["train", "dev", "test"] {
        let path = data.join(format!("{split}.jsonl"));
        let lines: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .take(n)
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(&path, lines.concat()).unwrap();
    }
    data
}

/// A tiny codec and a tiny CTC teacher, two training steps each.
pub fn models(dir: &Path, data: &Path) -> (PathBuf, PathBuf) {
    let codec = dir.join("codec");
    ok(&[
        "codec",
        "train",
        "--data",
        s(data),
        "--out",
        s(&codec),
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--batch",
        "2",
        "--segment",
        "0.4",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
    ]);
    let ctc = dir.join("ctc");
    ok(&[
        "train",
        "ctc",
        "--data",
        s(data),
        "--out",
        s(&ctc),
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--batch",
        "4",
        "--valid-every",
        "0",
    ]);
    (codec, ctc)
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn finite(v: &Value, field: &str) -> f64 {
    let x = v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing: {v}"));
    assert!(x.is_finite(), "{field} = {x}");
    x
}
