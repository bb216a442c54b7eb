//! `voxspec vocoder train | synth | eval` and `voxspec audio f0`, run as a user would, on three
//! utterances per split of the bundled corpus with the tiny vocoder preset.

use crate::common;

use std::path::{Path, PathBuf};

use voxspec_audio::{Audio, WavFormat, sine, write_wav};

use common::{fail, ok, prepared, s};

fn as_refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

#[test]
fn vocoder_train_resume_synth_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let data = prepared(dir.path(), 3);
    let run = dir.path().join("vocoder");
    let train = |steps: &str, resume: bool| {
        let mut args = vec![
            "vocoder",
            "train",
            "--data",
            s(&data),
            "--out",
            s(&run),
            "--preset",
            "tiny",
            "--segment",
            "0.5",
            "--batch",
            "2",
            "--steps",
            steps,
            "--warmup",
            "1",
            "--valid-every",
            "2",
        ];
        if resume {
            args.push("--resume");
        }
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
    };
    let out = ok(&as_refs(&train("2", false)));
    assert!(out.contains("trained 2 steps"), "{out}");
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["kind"], "vocoder");
    assert_eq!(config["n_mels"], 20);
    assert!(run.join("model.safetensors").is_file());
    // A run directory with checkpoints is not reused without --resume; with it, training goes on.
    fail(&as_refs(&train("3", false)));
    let out = ok(&as_refs(&train("3", true)));
    assert!(out.contains("trained 3 steps"), "{out}");

    // Analysis–resynthesis keeps the input length (22.05 kHz input, resampled to 16 kHz).
    let clip = dir.path().join("clip.wav");
    write_wav(
        &clip,
        &Audio::new(sine(220.0, 22050, 22050, 0.3), 22050),
        WavFormat::Pcm16,
    )
    .unwrap();
    for extra in [None, Some("--griffin-lim")] {
        let out_dir = dir.path().join(if extra.is_some() { "gl" } else { "voc" });
        let mut args = vec![
            "vocoder",
            "synth",
            "--vocoder",
            s(&run),
            s(&clip),
            "--out",
            s(&out_dir),
        ];
        args.extend(extra);
        ok(&args);
        let audio = voxspec_audio::load(&out_dir.join("clip.wav")).unwrap();
        assert_eq!(audio.sample_rate, 16000);
        assert_eq!(audio.samples.len(), 16000);
    }

    // Bad input: a missing model directory, a codec-less path, an unreadable input file.
    let e = fail(&[
        "vocoder",
        "synth",
        "--vocoder",
        s(&dir.path().join("missing")),
        s(&clip),
        "--out",
        s(dir.path()),
    ]);
    assert!(e.contains("missing") && e.contains("does not exist"), "{e}");
    let e = fail(&[
        "vocoder",
        "synth",
        "--vocoder",
        s(&data),
        s(&clip),
        "--out",
        s(dir.path()),
    ]);
    assert!(e.contains("config.json"), "{e}");
    let e = fail(&[
        "vocoder",
        "synth",
        "--vocoder",
        s(&run),
        "/nonexistent/x.wav",
        "--out",
        s(dir.path()),
    ]);
    assert!(e.contains("/nonexistent/x.wav"), "{e}");

    // Evaluation: the JSON report and clips `eval intelligibility --dir` reads.
    let report = dir.path().join("eval.json");
    let audio_dir = dir.path().join("clips");
    let teacher = repo("checkpoints/ctc-minitts");
    ok(&[
        "vocoder",
        "eval",
        "--vocoder",
        s(&run),
        "--data",
        s(&data),
        "--max-utterances",
        "2",
        "--teacher",
        s(&teacher),
        "--out",
        s(&report),
        "--audio-dir",
        s(&audio_dir),
    ]);
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["utterances"], 2);
    let mcd_voc = r["vocoder_resynthesis"]["mcd_db"].as_f64().unwrap();
    let mcd_gl = r["griffin_lim_resynthesis"]["mcd_db"].as_f64().unwrap();
    assert!(mcd_voc > 0.0 && mcd_gl > 0.0, "{mcd_voc} {mcd_gl}");
    assert!(r["original"]["mcd_db"].is_null());
    for system in ["original", "vocoder", "griffin_lim"] {
        let n = std::fs::read_dir(audio_dir.join(system)).unwrap().count();
        assert_eq!(n, 4, "{system}: a wav and a txt per utterance");
    }
    let out = ok(&[
        "eval",
        "intelligibility",
        "--dir",
        s(&audio_dir.join("original")),
        "--candidates",
        s(&data.join("test.jsonl")),
        "--teacher",
        s(&teacher),
    ]);
    assert!(out.contains("| 2 |"), "{out}");
    fail(&[
        "vocoder",
        "eval",
        "--vocoder",
        s(&run),
        "--data",
        s(&data),
        "--max-utterances",
        "0",
    ]);
}

#[test]
fn audio_f0_reads_a_tone_and_calls_silence_unvoiced() {
    let dir = tempfile::tempdir().unwrap();
    let tone = dir.path().join("tone.wav");
    let silence = dir.path().join("silence.wav");
    write_wav(
        &tone,
        &Audio::new(sine(180.0, 16000, 16000, 0.4), 16000),
        WavFormat::Pcm16,
    )
    .unwrap();
    write_wav(
        &silence,
        &Audio::new(vec![0.0; 8000], 16000),
        WavFormat::Pcm16,
    )
    .unwrap();
    let out = ok(&["audio", "f0", s(&tone), s(&silence)]);
    let tone_line = out.lines().find(|l| l.contains("tone.wav")).unwrap();
    let hz: f32 = tone_line
        .split("median F0 ")
        .nth(1)
        .and_then(|r| r.split(" Hz").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{tone_line}"));
    assert!((hz - 180.0).abs() < 3.6, "{tone_line}");
    let silence_line = out.lines().find(|l| l.contains("silence.wav")).unwrap();
    assert!(silence_line.contains("unvoiced"), "{silence_line}");
    let e = fail(&["audio", "f0", "--fmin", "600", s(&tone)]);
    assert!(e.contains("fmax"), "{e}");
}
