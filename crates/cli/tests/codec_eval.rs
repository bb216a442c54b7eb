//! `voxspec codec eval` and `voxspec bench codec`, run as a user would, with a tiny codec and a
//! tiny CTC teacher trained for two steps on a slice of the bundled corpus: the reports' fields
//! are present and finite, and bad model directories fail with a message, not a panic.

use crate::common;

use std::path::Path;

use common::{fail, finite, models, ok, prepared, read_json, s};

#[test]
fn help_explains_the_commands() {
    let help = ok(&["codec", "eval", "--help"]);
    for flag in [
        "--codec",
        "--teacher",
        "--data",
        "--split",
        "--max-utterances",
        "--out",
        "--save-audio",
        "MFCC-based",
    ] {
        assert!(help.contains(flag), "codec eval --help lacks {flag}");
    }
    let help = ok(&["bench", "codec", "--help"]);
    for flag in ["--codec", "--data", "--seconds", "--repeat", "--out"] {
        assert!(help.contains(flag), "bench codec --help lacks {flag}");
    }
}

#[test]
fn eval_and_bench_write_finite_reports_and_refuse_bad_models() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = prepared(dir, 6);
    let (codec, ctc) = models(dir, &data);

    // codec eval: the table, every field finite, per-utterance scores, saved audio.
    let report = dir.join("eval.json");
    let wavs = dir.join("wavs");
    let out = ok(&[
        "codec",
        "eval",
        "--codec",
        s(&codec),
        "--teacher",
        s(&ctc),
        "--data",
        s(&data),
        "--max-utterances",
        "3",
        "--out",
        s(&report),
        "--save-audio",
        s(&wavs),
        "--save-count",
        "1",
    ]);
    for row in [
        "| audio | MCD (dB) | MCD voiced (dB) | F0 RMSE (cents) |",
        "| original |",
        "| codec, all 4 RVQ layers |",
        "| codec, RVQ-1 only |",
    ] {
        assert!(out.contains(row), "{out}");
    }
    let r = read_json(&report);
    assert_eq!(r["split"], "test");
    assert_eq!(r["utterances"], 3);
    for key in ["mcd_db", "f0_rmse_cents", "gross_f0_error", "vuv_error"] {
        let v = r["voiced_full"][key].as_f64().unwrap_or(f64::NAN);
        assert!(v.is_finite() && v >= 0.0, "voiced_full.{key} = {v}");
    }
    assert_eq!(r["n_q"], 4);
    assert_eq!(r["sample_rate"], 16000);
    assert_eq!(r["mcd_config"]["n_coefficients"], 13);
    assert!(r["mcd_definition"].as_str().unwrap().contains("MFCC"));
    for field in ["mcd_full_db", "mcd_rvq1_db"] {
        assert!(finite(&r, field) > 0.0, "{field}: {r}");
    }
    for field in ["cer_original", "cer_full", "cer_rvq1"] {
        assert!(finite(&r, field) >= 0.0, "{field}: {r}");
    }
    // Forced choice among every test transcript, not only the 3 evaluated.
    let n_test = voxspec_data::read_manifest(&data.join("test.jsonl"))
        .unwrap()
        .len();
    assert_eq!(r["forced_choice_candidates"], n_test);
    for field in [
        "forced_choice_original",
        "forced_choice_full",
        "forced_choice_rvq1",
    ] {
        assert!((0.0..=1.0).contains(&finite(&r, field)), "{field}: {r}");
    }
    assert!(finite(&r, "audio_seconds") > 0.0);
    let per = r["per_utterance"].as_array().unwrap();
    assert_eq!(per.len(), 3);
    for u in per {
        for field in [
            "mcd_full_db",
            "mcd_rvq1_db",
            "cer_original",
            "cer_full",
            "cer_rvq1",
        ] {
            finite(u, field);
        }
    }
    let id = per[0]["id"].as_str().unwrap();
    for name in ["reference", "full", "rvq1"] {
        let wav = wavs.join(format!("{id}.{name}.wav"));
        let audio = voxspec_audio::load(&wav).unwrap();
        assert_eq!(audio.sample_rate, 16000);
        assert!((audio.duration_secs() - finite(&per[0], "seconds")).abs() < 1e-3);
    }
    assert_eq!(std::fs::read_dir(&wavs).unwrap().count(), 3);

    // bench codec on synthetic audio and on the corpus, with the thread count reported.
    let bench = dir.join("bench.json");
    for (extra, source) in [(vec![], "synthetic"), (vec!["--data", s(&data)], "corpus")] {
        let mut args = vec![
            "--threads",
            "1",
            "bench",
            "codec",
            "--codec",
            s(&codec),
            "--seconds",
            "3",
            "--repeat",
            "1",
            "--out",
            s(&bench),
        ];
        args.extend(extra);
        let out = ok(&args);
        assert!(out.contains("× real time"), "{out}");
        let b = read_json(&bench);
        assert_eq!(b["audio"], source, "{b}");
        assert_eq!(b["threads"], 1);
        assert_eq!(b["frames"], 150);
        assert!((finite(&b, "audio_seconds") - 3.0).abs() < 1e-9);
        let results = b["results"].as_array().unwrap();
        let stages: Vec<&str> = results
            .iter()
            .map(|r| r["stage"].as_str().unwrap())
            .collect();
        assert_eq!(stages, ["encode", "decode"]);
        for r in results {
            for field in [
                "wall_seconds",
                "wall_seconds_mean",
                "real_time_factor",
                "x_real_time",
            ] {
                assert!(finite(r, field) > 0.0, "{field}: {r}");
            }
        }
        if source == "corpus" {
            assert!(b["utterances"].as_u64().unwrap() >= 1, "{b}");
        }
    }

    // A missing codec directory and one of another kind: a clear error, exit code 1.
    let missing = dir.join("no-such-codec");
    let eval_with = |codec: &Path, teacher: &Path| {
        fail(&[
            "codec",
            "eval",
            "--codec",
            s(codec),
            "--teacher",
            s(teacher),
            "--data",
            s(&data),
            "--out",
            s(&dir.join("bad.json")),
        ])
    };
    let e = eval_with(&missing, &ctc);
    assert!(e.contains("no-such-codec"), "{e}");
    assert!(e.contains("not a voxspec model directory"), "{e}");
    let e = eval_with(&ctc, &ctc);
    assert!(e.contains("\"ctc\" checkpoint"), "{e}");
    assert!(e.contains("expected \"speechtokenizer\""), "{e}");
    let e = eval_with(&codec, &codec);
    assert!(e.contains("is not a CTC teacher"), "{e}");
    let e = fail(&[
        "bench",
        "codec",
        "--codec",
        s(&missing),
        "--out",
        s(&dir.join("bad.json")),
    ]);
    assert!(e.contains("not a voxspec model directory"), "{e}");
    let e = fail(&[
        "bench",
        "codec",
        "--codec",
        s(&ctc),
        "--out",
        s(&dir.join("bad.json")),
    ]);
    assert!(e.contains("expected \"speechtokenizer\""), "{e}");
    assert!(!dir.join("bad.json").exists());

    // A split without a manifest.
    let e = fail(&[
        "codec",
        "eval",
        "--codec",
        s(&codec),
        "--teacher",
        s(&ctc),
        "--data",
        s(&data),
        "--split",
        "nope",
        "--out",
        s(&dir.join("bad.json")),
    ]);
    assert!(e.contains("nope"), "{e}");
}
