//! The `voxspec` binary, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn voxspec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_voxspec"))
        .args(args)
        .env("VOXSPEC_NO_ASR", "1")
        .output()
        .expect("the voxspec binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn minitts() -> String {
    repo()
        .join("datasets/minitts")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["prepare", "--help"],
        vec!["tokenizer", "train", "--help"],
        vec!["tokenizer", "encode", "--help"],
        vec!["audio", "info", "--help"],
        vec!["audio", "convert", "--help"],
        vec!["bench", "audio", "--help"],
    ] {
        let o = voxspec(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("Usage"), "{args:?}");
    }
    assert!(text(&voxspec(&["prepare", "--help"])).contains("--header-only"));
}

#[test]
fn bad_input_gives_a_clear_error_not_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("m");
    let out = out.to_str().unwrap();

    let o = voxspec(&["prepare", "--corpus", "/no/such/corpus", "--out", out]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("/no/such/corpus") && !text(&o).contains("panicked"),
        "{}",
        text(&o)
    );

    let o = voxspec(&[
        "prepare",
        "--corpus",
        &minitts(),
        "--out",
        out,
        "--train-subsets",
        "train-other-500",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("train-other-500"), "{}", text(&o));

    let bad = tmp.path().join("noise.wav");
    std::fs::write(&bad, b"definitely not audio").unwrap();
    let o = voxspec(&["audio", "info", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("noise.wav") && !text(&o).contains("panicked"),
        "{}",
        text(&o)
    );

    let o = voxspec(&[
        "tokenizer",
        "encode",
        "--tokenizer",
        "/no/tok.json",
        "--text",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("/no/tok.json"), "{}", text(&o));
}

#[test]
fn prepare_then_tokenizer_on_the_bundled_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let d = data.to_str().unwrap();
    let o = voxspec(&["prepare", "--corpus", &minitts(), "--out", d]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("train"), "{}", text(&o));
    let o = voxspec(&["prepare", "--corpus", &minitts(), "--out", d]);
    assert!(text(&o).contains("up to date"), "{}", text(&o));

    let tok = data.join("tokenizer.json");
    let manifest = data.join("train.jsonl");
    let o = voxspec(&[
        "tokenizer",
        "train",
        "--manifest",
        manifest.to_str().unwrap(),
        "--out",
        tok.to_str().unwrap(),
        "--vocab-size",
        "200",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&tok).unwrap()).unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap().len();
    assert!(vocab > 40 && vocab <= 200, "{vocab}");

    let o = voxspec(&[
        "tokenizer",
        "encode",
        "--tokenizer",
        tok.to_str().unwrap(),
        "--text",
        "The Birch Canoe 你",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("normalized: the birch canoe 你"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("unknown characters"), "{}", text(&o));
}

#[test]
fn phoneme_tokenizer_needs_no_manifest_and_encodes_text_to_phones() {
    let tmp = tempfile::tempdir().unwrap();
    let tok = tmp.path().join("phonemes.json");
    let t = tok.to_str().unwrap();
    let o = voxspec(&["tokenizer", "train", "--kind", "phoneme", "--out", t]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("44 tokens"), "{}", text(&o));
    let o = voxspec(&[
        "tokenizer",
        "encode",
        "--tokenizer",
        t,
        "--text",
        "The cat sat, 2 blorfts & more.",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("phones: SIL DH AH K AE T S AE T SIL T UW B L AO R F T S M AO R SIL"),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("cannot pronounce (dropped): {'&'}"),
        "{}",
        text(&o)
    );

    // The learned kinds still need transcripts, and say so.
    let bpe = tmp.path().join("bpe.json");
    let o = voxspec(&["tokenizer", "train", "--out", bpe.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--manifest is required"), "{}", text(&o));
}

#[test]
fn audio_convert_and_bench_write_their_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let clip = repo().join("crates/audio/tests/fixtures");
    let out = tmp.path().join("bench.json");
    let o = voxspec(&[
        "bench",
        "audio",
        &minitts(),
        "--max-files",
        "4",
        "--repeat",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(report["files"], 4);
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    assert!(
        results
            .iter()
            .all(|r| r["audio_seconds_per_second"].as_f64().unwrap() > 0.0)
    );

    let flac = clip.join("speech_22050.flac");
    let wav = tmp.path().join("out.wav");
    let o = voxspec(&[
        "audio",
        "convert",
        flac.to_str().unwrap(),
        wav.to_str().unwrap(),
        "--rate",
        "24000",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = voxspec(&["audio", "info", wav.to_str().unwrap()]);
    assert!(text(&o).contains("24000 Hz, 1 channel"), "{}", text(&o));
}
