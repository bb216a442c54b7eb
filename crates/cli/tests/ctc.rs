//! `voxspec train ctc` and `voxspec teacher extract | transcribe`, run as a user would, on a
//! small slice of the bundled corpus with the tiny preset.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use voxspec_data::read_manifest;
use voxspec_teacher::FeatureStoreReader;

use common::{prepared, s, text, voxspec};

#[test]
fn help_explains_the_commands() {
    for args in [
        vec!["train", "--help"],
        vec!["train", "ctc", "--help"],
        vec!["teacher", "extract", "--help"],
        vec!["teacher", "transcribe", "--help"],
    ] {
        let o = voxspec(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("Usage"), "{args:?}");
    }
    let help = text(&voxspec(&["train", "ctc", "--help"]));
    for flag in [
        "--data", "--out", "--steps", "--batch", "--preset", "--resume", "Ctrl-C",
    ] {
        assert!(help.contains(flag), "train ctc --help lacks {flag}");
    }
}

#[test]
fn train_extract_transcribe_end_to_end() {
    let tmp = tempfile::tempdir().unwrap();
    let data = prepared(tmp.path(), 12);
    let run = tmp.path().join("run");
    let train = |steps: &str, extra: &[&str]| {
        let mut args = vec![
            "train",
            "ctc",
            "--data",
            s(&data),
            "--out",
            s(&run),
            "--preset",
            "tiny",
            "--steps",
            steps,
            "--batch",
            "6",
            "--valid-every",
            "2",
            "--log-every",
            "1",
        ];
        args.extend_from_slice(extra);
        voxspec(&args)
    };
    let o = train("4", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("dev CER:"), "{}", text(&o));
    for file in [
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "eval.json",
        "run.json",
    ] {
        assert!(run.join(file).is_file(), "{file} missing");
    }
    let eval: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("eval.json")).unwrap()).unwrap();
    assert_eq!(eval["step"], 4);
    assert_eq!(eval["utterances"], 12);
    assert!(eval["cer"].as_f64().unwrap() >= 0.0);
    let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(
        metrics.lines().filter(|l| l.contains("\"train\"")).count(),
        4
    );
    assert_eq!(
        metrics.lines().filter(|l| l.contains("\"valid\"")).count(),
        2
    );

    // A run directory with checkpoints is not reused silently; --resume continues it.
    let o = train("6", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("--resume"), "{}", text(&o));
    let o = train("6", &["--resume"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("trained 6 steps"), "{}", text(&o));

    // Features for every split, resumable.
    let feats = tmp.path().join("feats");
    let extract = || {
        voxspec(&[
            "teacher",
            "extract",
            "--teacher",
            s(&run),
            "--data",
            s(&data),
            "--out",
            s(&feats),
            "--shard-frames",
            "500",
        ])
    };
    let o = extract();
    assert!(o.status.success(), "{}", text(&o));
    for split in ["train", "dev", "test"] {
        let store = FeatureStoreReader::open(&feats, split).unwrap();
        let manifest = read_manifest(&data.join(format!("{split}.jsonl"))).unwrap();
        assert_eq!(store.len(), manifest.len(), "{split}");
        assert_eq!(store.meta().dim, 32);
        assert_eq!(store.meta().frame_rate, 50.0);
        assert_eq!(store.meta().teacher, "ctc");
        assert_eq!(store.meta().layer, "2");
        let u = &manifest[0];
        let f = store.get(&u.id).unwrap().unwrap();
        // 50 Hz: ⌈(samples / 160 + 1) / 2⌉ frames.
        let samples = (u.duration * 16000.0).round() as usize;
        assert!(
            f.frames.abs_diff((samples / 160 + 2) / 2) <= 1,
            "{} frames",
            f.frames
        );
        assert!(f.data.iter().all(|v| v.is_finite()));
    }
    let o = extract();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("train: 0 utterances written (0 frames), 12 already there"),
        "{}",
        text(&o)
    );
    let o = voxspec(&[
        "teacher",
        "extract",
        "--teacher",
        s(&run),
        "--data",
        s(&data),
        "--out",
        s(&feats),
        "--layer",
        "mean",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("disagrees"), "{}", text(&o));

    // Transcribe and score a manifest.
    let scores = tmp.path().join("scores.jsonl");
    let o = voxspec(&[
        "teacher",
        "transcribe",
        "--teacher",
        s(&run),
        "--manifest",
        s(&data.join("dev.jsonl")),
        "--out",
        s(&scores),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("CER:"), "{}", text(&o));
    let lines = std::fs::read_to_string(&scores).unwrap();
    assert_eq!(lines.lines().count(), 12);
}

#[test]
fn ctrl_c_writes_a_checkpoint_and_exits_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let data = prepared(tmp.path(), 6);
    let run = tmp.path().join("run");
    let child = Command::new(env!("CARGO_BIN_EXE_voxspec"))
        .args([
            "train",
            "ctc",
            "--data",
            s(&data),
            "--out",
            s(&run),
            "--preset",
            "tiny",
            "--steps",
            "100000",
            "--batch",
            "3",
            "--log-every",
            "1",
            "--valid-every",
            "0",
            "--checkpoint-every",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until training is under way (a metrics line is written after every step).
    let metrics = run.join("metrics.jsonl");
    let start = Instant::now();
    while !std::fs::read_to_string(&metrics).is_ok_and(|m| m.lines().count() >= 2) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "training never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("stopped at step"), "{}", text(&o));
    let checkpoints: Vec<_> = std::fs::read_dir(&run)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("checkpoint-"))
        .collect();
    assert_eq!(checkpoints.len(), 1, "{}", text(&o));
    assert!(checkpoints[0].path().join("model.safetensors").is_file());
    assert!(run.join("model.safetensors").is_file());
}
