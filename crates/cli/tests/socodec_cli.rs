//! `voxspec codec train --kind socodec` and `codec extract | encode | decode | eval |
//! plot-streams` on a SoCodec, run as a user would on a slice of the bundled corpus with the
//! shipped CTC teacher's features; and the clear errors on bad input.

use crate::common;

use std::path::{Path, PathBuf};

use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_data::TokenStore;

use common::{fail, ok, prepared, read_json, s};

fn ctc() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../checkpoints/ctc-minitts")
        .to_string_lossy()
        .into_owned()
}

fn features(dir: &Path, data: &Path) -> PathBuf {
    let out = dir.join("features");
    ok(&[
        "teacher",
        "extract",
        "--teacher",
        &ctc(),
        "--data",
        s(data),
        "--out",
        s(&out),
    ]);
    out
}

fn train(dir: &Path, data: &Path, feats: &Path, quantizer: &str) -> PathBuf {
    let run = dir.join(format!("socodec-{quantizer}"));
    let out = ok(&[
        "codec",
        "train",
        "--kind",
        "socodec",
        "--quantizer",
        quantizer,
        "--data",
        s(data),
        "--teacher-features",
        s(feats),
        "--out",
        s(&run),
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--batch",
        "2",
        "--segment",
        "1.2",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
        "--adversarial",
    ]);
    assert!(out.contains("trained 2 steps"), "{out}");
    assert!(out.contains("144-d at 50 Hz"), "{out}");
    run
}

fn write_codes(path: &Path, shape: [usize; 2], data: &[i64]) {
    let bytes: Vec<u8> = data.iter().flat_map(|c| c.to_le_bytes()).collect();
    let view =
        safetensors::tensor::TensorView::new(safetensors::Dtype::I64, shape.to_vec(), &bytes)
            .unwrap();
    std::fs::write(
        path,
        safetensors::serialize([("codes", view)], None).unwrap(),
    )
    .unwrap();
}

#[test]
fn socodec_trains_extracts_encodes_decodes_and_evaluates() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let data = prepared(dir, 3);
    let feats = features(dir, &data);
    let run = train(dir, &data, &feats, "opq");
    let config = read_json(&run.join("config.json"));
    assert_eq!(config["kind"], "socodec");
    assert_eq!(config["model"]["streams"], 4);
    assert_eq!(config["model"]["frame_ms"], 120);
    assert_eq!(
        config["model"]["feature_mean"].as_array().unwrap().len(),
        144
    );

    // token stores [4, ceil(frames / 6)] with tokens below 16²
    let tokens = dir.join("tokens");
    ok(&[
        "codec",
        "extract",
        "--codec",
        s(&run),
        "--teacher-features",
        s(&feats),
        "--data",
        s(&data),
        "--out",
        s(&tokens),
    ]);
    let store = TokenStore::open(&tokens, "test").unwrap();
    assert_eq!(store.meta().n_q, 4);
    assert_eq!(store.meta().codebook_size, 256);
    assert_eq!(store.len(), 3);

    let first = std::fs::read_to_string(data.join("test.jsonl")).unwrap();
    let path: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    let audio = path["path"].as_str().unwrap().to_string();
    let codes = dir.join("codes.safetensors");
    let out = ok(&[
        "codec",
        "encode",
        "--codec",
        s(&run),
        &audio,
        "-o",
        s(&codes),
        "--teacher",
        &ctc(),
    ]);
    assert!(out.contains("tokens [4, "), "{out}");
    let wav_out = dir.join("out.wav");
    for streams in ["1", "4"] {
        ok(&[
            "codec",
            "decode",
            "--codec",
            s(&run),
            s(&codes),
            "-o",
            s(&wav_out),
            "--reference",
            &audio,
            "--griffin-lim",
            "--streams",
            streams,
        ]);
        let a = voxspec_audio::load(&wav_out).unwrap();
        assert_eq!(a.sample_rate, 16000);
        assert!(a.samples.iter().all(|x| x.is_finite()));
    }

    // eval from the first b streams, then the Fig. 4 table and plots
    let report = dir.join("eval.json");
    let out = ok(&[
        "codec",
        "eval",
        "--codec",
        s(&run),
        "--teacher",
        &ctc(),
        "--data",
        s(&data),
        "--max-utterances",
        "2",
        "--griffin-lim",
        "-o",
        s(&report),
    ]);
    assert!(out.contains("first 4 stream(s)"), "{out}");
    let r = read_json(&report);
    assert_eq!(r["rows"].as_array().unwrap().len(), 6);
    let out = ok(&[
        "codec",
        "plot-streams",
        "--report",
        s(&report),
        "--out",
        s(&dir.join("fig4")),
    ]);
    assert!(
        out.contains("| OPQ (120 ms) | first 1 stream(s) |"),
        "{out}"
    );
    assert!(dir.join("fig4-cer.png").is_file());

    // bad input: one clear error each, no panic
    let bad = dir.join("bad.safetensors");
    std::fs::write(&bad, b"not a safetensors file").unwrap();
    let dec = |input: &Path, extra: &[&str]| {
        let mut args = vec![
            "codec",
            "decode",
            "--codec",
            s(&run),
            s(input),
            "-o",
            s(&wav_out),
            "--griffin-lim",
        ];
        args.extend_from_slice(extra);
        fail(&args)
    };
    let e = dec(&bad, &["--reference", &audio]);
    assert!(e.contains("bad.safetensors"), "{e}");
    write_codes(&bad, [2, 3], &[0, 1, 2, 3, 4, 256]);
    let e = dec(&bad, &["--reference", &audio]);
    assert!(e.contains("token 256"), "{e}");
    write_codes(&bad, [5, 1], &[0, 1, 2, 3, 4]);
    let e = dec(&bad, &["--reference", &audio]);
    assert!(e.contains("4 streams"), "{e}");
    let e = dec(&codes, &["--reference", &audio, "--streams", "5"]);
    assert!(e.contains("--streams 5"), "{e}");
    let e = dec(&codes, &[]);
    assert!(e.contains("--reference"), "{e}");
    let short = dir.join("short.wav");
    write_wav(
        &short,
        &Audio::new(vec![0.1; 8000], 16000),
        WavFormat::Pcm16,
    )
    .unwrap();
    let e = dec(&codes, &["--reference", s(&short)]);
    assert!(e.contains("clip window"), "{e}");
    let e = fail(&[
        "codec",
        "decode",
        "--codec",
        s(&run),
        s(&codes),
        "-o",
        s(&wav_out),
        "--reference",
        &audio,
        "--vocoder",
        s(&dir.join("no-vocoder")),
    ]);
    assert!(e.contains("no-vocoder"), "{e}");
    // training without features is refused
    let e = fail(&[
        "codec",
        "train",
        "--kind",
        "socodec",
        "--data",
        s(&data),
        "--out",
        s(&dir.join("nofeat")),
        "--steps",
        "1",
    ]);
    assert!(e.contains("--teacher-features"), "{e}");
    // a sub-codebook whose square does not fit the u16 token stores is refused by name
    let e = fail(&[
        "codec",
        "train",
        "--kind",
        "socodec",
        "--data",
        s(&data),
        "--teacher-features",
        s(&feats),
        "--out",
        s(&dir.join("big")),
        "--sub-codebook",
        "300",
        "--steps",
        "1",
    ]);
    assert!(e.contains("sub_codebook_size"), "{e}");
}
