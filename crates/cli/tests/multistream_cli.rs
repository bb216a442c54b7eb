//! `voxspec train multistream` (target and draft), `synthesize` with a multi-stream LM (AR and
//! speculative decoders) and `bench multistream`, run as a user would on a slice of the bundled
//! corpus with a 2-step SoCodec; and the clear errors on bad input.

use crate::common;

use std::path::{Path, PathBuf};

use common::{fail, ok, prepared, read_json, s};

fn ctc() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../checkpoints/ctc-minitts")
        .to_string_lossy()
        .into_owned()
}

/// Prepared data with a phoneme tokenizer, teacher features, a 2-step SoCodec and its tokens.
fn codec_and_tokens(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let data = prepared(dir, 4);
    ok(&[
        "tokenizer",
        "train",
        "--manifest",
        s(&data.join("train.jsonl")),
        "--out",
        s(&data.join("tokenizer.json")),
        "--kind",
        "phoneme",
    ]);
    let feats = dir.join("features");
    ok(&[
        "teacher",
        "extract",
        "--teacher",
        &ctc(),
        "--data",
        s(&data),
        "--out",
        s(&feats),
    ]);
    let codec = dir.join("socodec");
    ok(&[
        "codec",
        "train",
        "--kind",
        "socodec",
        "--data",
        s(&data),
        "--teacher-features",
        s(&feats),
        "--out",
        s(&codec),
        "--preset",
        "tiny",
        "--sub-codebook",
        "8",
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
    ]);
    let tokens = dir.join("tokens");
    ok(&[
        "codec",
        "extract",
        "--codec",
        s(&codec),
        "--teacher-features",
        s(&feats),
        "--data",
        s(&data),
        "--out",
        s(&tokens),
        "--phase-shifts",
        "3",
    ]);
    (data, codec, tokens)
}

fn train_args<'a>(
    data: &'a Path,
    tokens: &'a Path,
    codec: &'a Path,
    out: &'a Path,
) -> Vec<&'a str> {
    vec![
        "train",
        "multistream",
        "--data",
        s(data),
        "--tokens",
        s(tokens),
        "--codec",
        s(codec),
        "--out",
        s(out),
        "--preset",
        "tiny",
        "--steps",
        "2",
        "--batch",
        "2",
        "--valid-every",
        "2",
        "--checkpoint-every",
        "0",
    ]
}

#[test]
fn multistream_trains_drafts_speaks_and_benchmarks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (data, codec, tokens) = codec_and_tokens(dir);

    let lm = dir.join("lm");
    let mut args = train_args(&data, &tokens, &codec, &lm);
    args.extend(["--code-dropout", "0.5", "--mtp-heads", "3"]);
    let out = ok(&args);
    assert!(
        out.contains("aligned (step track + duration predictor)"),
        "{out}"
    );
    assert!(out.contains("trained 2 steps"), "{out}");
    // The training split on 3 token grids (0, 20 and 40 ms), dev and test on one.
    let train = voxspec_data::TokenStore::open(&tokens, "train").unwrap();
    let plain = train.ids().iter().filter(|i| !i.contains('@')).count();
    assert!(plain > 0);
    for ms in [20, 40] {
        let shifted = train
            .ids()
            .iter()
            .filter(|i| i.ends_with(&format!("@{ms}ms")))
            .count();
        assert_eq!(shifted, plain, "{ms} ms");
    }
    let dev = voxspec_data::TokenStore::open(&tokens, "dev").unwrap();
    assert!(dev.ids().iter().all(|i| !i.contains('@')));
    assert!(
        out.contains(&format!("phase shifts: {} shifted encodings", 2 * plain)),
        "{out}"
    );
    let config = read_json(&lm.join("config.json"));
    assert_eq!(config["kind"], "multistream");
    assert_eq!(config["model"]["streams"], 4);
    assert_eq!(config["model"]["codebook_size"], 64);
    assert_eq!(config["model"]["align"]["units_per_frame"], 6);
    assert_eq!(config["model"]["mtp"]["heads"], 3);
    for j in 0..4 {
        assert!(lm.join(format!("transitions-{j}.safetensors")).is_file());
    }
    let metrics = std::fs::read_to_string(lm.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("streams_shuffled_text"), "{metrics}");

    let draft = dir.join("draft");
    let mut args = train_args(&data, &tokens, &codec, &draft);
    args.extend(["--target", s(&lm), "--layers", "0"]);
    let out = ok(&args);
    assert!(out.contains("draft (1 of 2 target layers)"), "{out}");
    let draft_config = read_json(&draft.join("config.json"));
    assert_eq!(draft_config["kind"], "multistream-draft");
    assert!(
        draft_config["model"]["mtp"].is_null(),
        "a draft has no extra heads"
    );

    let reference = std::fs::read_to_string(data.join("train.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(reference.lines().next().unwrap()).unwrap();
    let reference = first["path"].as_str().unwrap().to_string();
    let wav = dir.join("out.wav");
    for decoder in [
        &["--decoder", "ar"][..],
        &["--decoder", "sd", "--draft", s(&draft)],
        &["--decoder", "pcg", "--draft", s(&draft)],
        &["--decoder", "mtp", "--heads", "3"],
        &["--decoder", "mtp-viterbi", "--heads", "2", "--top-k", "3"],
    ] {
        let mut args = vec![
            "synthesize",
            "--model",
            s(&lm),
            "--text",
            "The birch canoe slid on the smooth planks.",
            "--prompt",
            &reference,
            "--griffin-lim",
            "-o",
            s(&wav),
        ];
        args.extend(decoder);
        let out = ok(&args);
        assert!(out.contains("frames × 4 streams"), "{out}");
        let audio = voxspec_audio::load(&wav).unwrap();
        assert_eq!(audio.sample_rate, 16000);
        assert!(!audio.samples.is_empty() && audio.samples.iter().all(|x| x.is_finite()));
    }

    // Medusa-1: heads on the frozen LM leave its own predictions, hence greedy AR, unchanged.
    let heads = dir.join("heads");
    let mut args = train_args(&data, &tokens, &codec, &heads);
    args.extend(["--base", s(&lm), "--mtp-heads", "2"]);
    let out = ok(&args);
    assert!(out.contains("1 multi-token heads on the frozen"), "{out}");
    assert_eq!(
        read_json(&heads.join("config.json"))["model"]["mtp"]["heads"],
        2
    );
    let speak_on = |model: &Path, wav: &Path, engine: &str| {
        ok(&[
            "synthesize",
            "--engine",
            engine,
            "--model",
            s(model),
            "--text",
            "The birch canoe slid on the smooth planks.",
            "--prompt",
            &reference,
            "--griffin-lim",
            "--decoder",
            "ar",
            "--temperature",
            "0",
            "-o",
            s(wav),
        ]);
        std::fs::read(wav).unwrap()
    };
    let speak = |model: &Path, wav: &Path| speak_on(model, wav, "native");
    assert_eq!(
        speak(&lm, &dir.join("native.wav")),
        speak_on(&lm, &dir.join("burn.wav"), "burn"),
        "greedy synthesis differs between the native engine and Burn"
    );
    assert_eq!(
        speak(&lm, &dir.join("base.wav")),
        speak(&heads, &dir.join("heads.wav")),
        "the base LM changed under its new heads"
    );

    let bench = dir.join("bench");
    let out = ok(&[
        "bench",
        "multistream",
        "--model",
        s(&lm),
        "--draft",
        s(&draft),
        "--reference",
        &reference,
        "--griffin-lim",
        "--data",
        s(&data),
        "--max-utterances",
        "2",
        "--gammas",
        "2",
        "--betas",
        "0",
        "--pcg",
        "--teacher",
        &ctc(),
        "--out",
        s(&bench),
    ]);
    assert!(out.contains("| multistream | ar |"), "{out}");
    let report = read_json(&bench.join("bench-multistream.json"));
    let rows = report["rows"].as_array().unwrap();
    // ar, sd γ=2, pcg γ=2, and the model's 3 heads independent and with Viterbi
    assert_eq!(rows.len(), 5, "{out}");
    assert!(out.contains("| pcg γ=2 |"), "{out}");
    assert!(rows[1]["acceptance"].as_f64().is_some());
    assert!(
        out.contains("| mtp k=3 |") && out.contains("| mtp-viterbi k=3 top-k=5 |"),
        "{out}"
    );
    assert!(rows.iter().all(|r| r["lm_rtf"].as_f64().unwrap() > 0.0));

    // bad input: one clear error each
    let err = fail(&[
        "synthesize",
        "--model",
        s(&lm),
        "--text",
        "hello",
        "-o",
        s(&wav),
    ]);
    assert!(err.contains("--prompt"), "{err}");
    let err = fail(&[
        "synthesize",
        "--model",
        s(&lm),
        "--text",
        "hello",
        "--prompt",
        &reference,
        "--decoder",
        "sd",
        "-o",
        s(&wav),
    ]);
    assert!(err.contains("--draft"), "{err}");
    let err = fail(&[
        "synthesize",
        "--model",
        s(&lm),
        "--text",
        "hello",
        "--prompt",
        &reference,
        "--decoder",
        "mtp",
        "--heads",
        "5",
        "--griffin-lim",
        "-o",
        s(&wav),
    ]);
    assert!(
        err.contains("--heads 5") && err.contains("3 prediction head"),
        "{err}"
    );
    let (bad, bad2) = (dir.join("bad"), dir.join("bad2"));
    let mut args = train_args(&data, &tokens, &codec, &bad);
    args.extend(["--streams", "9"]);
    let err = fail(&args);
    assert!(err.contains("--streams 9"), "{err}");
    let mut args = train_args(&data, &tokens, &codec, &bad2);
    args.extend(["--target", s(&draft)]);
    let err = fail(&args);
    assert!(err.contains("is itself a draft"), "{err}");
}
