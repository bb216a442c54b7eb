//! `voxspec train mtp | nar | draft` on a small synthetic corpus of (text, codes) pairs, run as
//! a user would: training, refusing to overwrite, resuming, drafts from the trained model, and
//! bad input named.

use std::path::Path;
use std::process::{Command, Output};

use voxspec_data::{
    Codes, Normalization, TextTokenizer, TokenStoreMeta, TokenStoreWriter, TokenizerKind,
    Utterance, write_manifest,
};

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

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Manifests, a character tokenizer and a 2-layer token store (codebook 8) under `root`.
fn corpus(root: &Path) {
    let data = root.join("data");
    let tokens = root.join("tokens");
    std::fs::create_dir_all(&data).expect("mkdir");
    let sentences = [
        "the cat sat",
        "a dog ran",
        "birds sing",
        "rain falls",
        "wind blows",
        "sun shines",
        "we talk",
        "they walk",
    ];
    let meta = TokenStoreMeta {
        n_q: 2,
        codebook_size: 8,
        frame_rate: 50.0,
    };
    for (split, range) in [("train", 0..6), ("dev", 6..8)] {
        let mut utts = Vec::new();
        let mut writer = TokenStoreWriter::new(&tokens, split, meta, 10_000).expect("writer");
        for i in range {
            let id = format!("s{}_{i}", i % 2);
            let frames = 6 + i;
            let s0: Vec<u32> = (0..frames as u32).map(|j| (i as u32 + j) % 8).collect();
            let s1: Vec<u32> = s0.iter().map(|c| (c + 3) % 8).collect();
            writer
                .push(
                    &id,
                    Codes::new(2, frames, [s0, s1].concat()).expect("codes"),
                )
                .expect("push");
            utts.push(Utterance {
                id,
                speaker: format!("s{}", i % 2),
                chapter: "c".into(),
                path: "unused.wav".into(),
                text: sentences[i].into(),
                duration: frames as f64 / 50.0,
                sample_rate: 16000,
                alignment: None,
            });
        }
        writer.finish().expect("finish");
        write_manifest(&data.join(format!("{split}.jsonl")), &utts).expect("manifest");
    }
    let tokenizer = TextTokenizer::train(
        sentences.iter(),
        TokenizerKind::Char,
        &Normalization::default(),
    )
    .expect("tokenizer");
    tokenizer.save(&data.join("tokenizer.json")).expect("save");
}

fn kind(dir: &Path) -> String {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("config.json")).expect("config"))
            .expect("json");
    json["kind"].as_str().unwrap_or("").to_string()
}

#[test]
fn language_models_train_resume_and_make_drafts() {
    let root = tempfile::tempdir().expect("tempdir");
    corpus(root.path());
    let (data, tokens) = (s(&root.path().join("data")), s(&root.path().join("tokens")));
    let mtp = root.path().join("mtp");
    let common = |out: &Path, steps: &str| -> Vec<String> {
        [
            "--data",
            &data,
            "--tokens",
            &tokens,
            "--out",
            &s(out),
            "--steps",
            steps,
            "--warmup",
            "1",
            "--valid-every",
            "2",
            "--checkpoint-every",
            "2",
            "--log-every",
            "1",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let run = |head: &[&str], rest: Vec<String>| {
        let mut args: Vec<String> = head.iter().map(|a| a.to_string()).collect();
        args.extend(rest);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        voxspec(&refs)
    };

    let o = run(
        &["train", "mtp", "--preset", "tiny", "--heads", "3"],
        common(&mtp, "3"),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kind(&mtp), "mtp");
    assert!(mtp.join("model.safetensors").is_file() && mtp.join("tokenizer.json").is_file());

    // An existing run is not overwritten; --resume continues it.
    let o = run(&["train", "mtp", "--preset", "tiny"], common(&mtp, "4"));
    assert!(!o.status.success());
    assert!(text(&o).contains("--resume"), "{}", text(&o));
    let mut resume = common(&mtp, "4");
    resume.push("--resume".into());
    let o = run(&["train", "mtp", "--preset", "tiny"], resume);
    assert!(o.status.success(), "{}", text(&o));
    let metrics = std::fs::read_to_string(mtp.join("metrics.jsonl")).expect("metrics");
    assert!(metrics.contains("\"step\":4"), "{metrics}");
    assert!(metrics.contains("head2"), "{metrics}");

    // Export: the card loads back with identical outputs and documents its tensors.
    let card = root.path().join("card");
    let o = voxspec(&["export", "--checkpoint", &s(&mtp), "--to", &s(&card)]);
    assert!(o.status.success(), "{}", text(&o));
    let device = burn::tensor::Device::flex();
    let (_, original) = voxspec_mtp::load_mtp(&mtp, &device).expect("original");
    let (_, exported) = voxspec_mtp::load_mtp(&card, &device).expect("exported");
    // Every output of a model on one fixed input, with its dtype.
    let outputs = |model: &voxspec_mtp::MtpModel| {
        let ids = burn::tensor::Tensor::<2, burn::tensor::Int>::from_data(
            burn::tensor::TensorData::new(vec![1i64, 2, 3, 4, 5], [1, 5]),
            &device,
        );
        model
            .forward(ids, None)
            .expect("forward")
            .into_iter()
            .map(|t| (t.dtype(), t.into_data().try_into_vec::<f32>().expect("f32")))
            .collect::<Vec<_>>()
    };
    assert_eq!(outputs(&original), outputs(&exported));
    let readme = std::fs::read_to_string(card.join("README.md")).expect("card");
    assert!(readme.contains("`heads.2.out.weight`") && readme.contains("Final logged metrics"));
    assert!(!card.join("run.json").exists() && !card.join("checkpoint-000004").exists());
    let o = voxspec(&["export", "--checkpoint", &s(&mtp), "--to", &s(&card)]);
    assert!(!o.status.success());
    assert!(text(&o).contains("not empty"), "{}", text(&o));

    // A bf16 export is half the size, loads back as f32, and its outputs stay within bf16
    // rounding of the original's.
    let half = root.path().join("card-bf16");
    let o = voxspec(&[
        "export",
        "--checkpoint",
        &s(&mtp),
        "--to",
        &s(&half),
        "--dtype",
        "bf16",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let size = |d: &std::path::Path| {
        std::fs::metadata(d.join("model.safetensors"))
            .expect("weights")
            .len()
    };
    assert!(
        size(&half) * 2 < size(&card) + 4096,
        "{} vs {}",
        size(&half),
        size(&card)
    );
    let (_, narrowed) = voxspec_mtp::load_mtp(&half, &device).expect("bf16 export");
    for ((_, a), (dtype, b)) in outputs(&original).into_iter().zip(outputs(&narrowed)) {
        assert_eq!(dtype, burn::tensor::DType::F32);
        let scale = a.iter().fold(0f32, |m, x| m.max(x.abs())).max(1e-3);
        let worst = a
            .iter()
            .zip(&b)
            .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            worst > 0.0,
            "bf16 weights gave bit-identical logits: not narrowed"
        );
        assert!(
            worst < 0.05 * scale,
            "bf16 export drifted: {worst} against scale {scale}"
        );
    }
    assert!(
        std::fs::read_to_string(half.join("README.md"))
            .expect("card")
            .contains("| BF16 |")
    );

    let nar = root.path().join("nar");
    let o = run(&["train", "nar", "--preset", "tiny"], common(&nar, "2"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kind(&nar), "nar");

    let draft = root.path().join("draft");
    let o = run(
        &[
            "train",
            "draft",
            "--target",
            &s(&mtp),
            "--layers",
            "0",
            "--distill-weight",
            "0.5",
        ],
        common(&draft, "2"),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(kind(&draft), "draft");

    // Offline acceptance of the draft (sd + 2 SSD rows) and of the 2 extra MTP heads.
    let report = root.path().join("acceptance.json");
    let o = voxspec(&[
        "bench",
        "acceptance",
        "--target",
        &s(&mtp),
        "--draft",
        &s(&draft),
        "--data",
        &data,
        "--tokens",
        &tokens,
        "--split",
        "dev",
        "--betas",
        "0,0.2,0.4",
        "--out",
        &s(&report),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
    let rows = json["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 3);
    let alphas: Vec<f64> = rows
        .iter()
        .map(|r| r["alpha"].as_f64().expect("alpha"))
        .collect();
    assert!(alphas.iter().all(|a| (0.0..=1.0).contains(a)), "{alphas:?}");
    // A larger tolerance never accepts less.
    assert!(
        alphas[0] <= alphas[1] && alphas[1] <= alphas[2],
        "{alphas:?}"
    );
    let o = voxspec(&[
        "bench",
        "acceptance",
        "--target",
        &s(&mtp),
        "--data",
        &data,
        "--tokens",
        &tokens,
        "--split",
        "dev",
        "--betas",
        "0",
        "--out",
        &s(&report),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
    assert_eq!(
        json["rows"].as_array().expect("rows").len(),
        2,
        "heads 1 and 2"
    );

    // A draft as deep as its 2-layer target, and a NAR model as a target, are refused.
    let o = run(
        &["train", "draft", "--target", &s(&mtp), "--layers", "0,-1"],
        common(&root.path().join("draft2"), "1"),
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("not shorter than its target"),
        "{}",
        text(&o)
    );
    let o = run(
        &["train", "draft", "--target", &s(&nar)],
        common(&root.path().join("draft3"), "1"),
    );
    assert!(!o.status.success());
    assert!(text(&o).contains("\"nar\""), "{}", text(&o));
}

#[test]
fn missing_codes_and_bad_settings_are_named() {
    let root = tempfile::tempdir().expect("tempdir");
    corpus(root.path());
    let data = s(&root.path().join("data"));
    let out = s(&root.path().join("run"));
    let o = voxspec(&[
        "train",
        "mtp",
        "--data",
        &data,
        "--tokens",
        &s(&root.path().join("nowhere")),
        "--out",
        &out,
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("train token store"), "{}", text(&o));
    let o = voxspec(&[
        "train",
        "mtp",
        "--data",
        &data,
        "--tokens",
        &s(&root.path().join("tokens")),
        "--out",
        &out,
        "--heads",
        "2",
        "--head-weights",
        "1,0.5,0.2",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--head-weights has 3 values for 2 heads"),
        "{}",
        text(&o)
    );
}

#[test]
fn device_lists_train_data_parallel_and_gpus_need_their_features() {
    let root = tempfile::tempdir().expect("tempdir");
    corpus(root.path());
    let (data, tokens) = (s(&root.path().join("data")), s(&root.path().join("tokens")));
    let out = root.path().join("mtp");
    let args = |device: &str, out: &Path| -> Vec<String> {
        [
            "--device",
            device,
            "train",
            "mtp",
            "--preset",
            "tiny",
            "--heads",
            "2",
            "--data",
            &data,
            "--tokens",
            &tokens,
            "--out",
            &s(out),
            "--steps",
            "2",
            "--batch",
            "2",
            "--valid-every",
            "0",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        voxspec(&refs)
    };

    // Two replicas on the CPU (one device twice): each reads its own batch every step.
    let o = run(args("cpu,cpu", &out));
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("data-parallel on cpu,cpu"),
        "{}",
        text(&o)
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("checkpoint-000002/train_state/state.json"))
            .expect("state"),
    )
    .expect("json");
    assert_eq!(state["replicas"], 2);

    // Commands that compute on one device refuse a list.
    let o = voxspec(&[
        "--device",
        "cpu,cpu",
        "train",
        "draft",
        "--target",
        &s(&out),
        "--data",
        &data,
        "--tokens",
        &tokens,
        "--out",
        &s(&root.path().join("draft")),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("2 devices are selected (cpu,cpu)"),
        "{}",
        text(&o)
    );

    let o = run(args("tpu", &root.path().join("tpu")));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("expected cpu, wgpu, wgpu:N, cuda or cuda:N"),
        "{}",
        text(&o)
    );
    if !cfg!(feature = "gpu") {
        let o = run(args("wgpu:0", &root.path().join("wgpu")));
        assert!(!o.status.success());
        assert!(text(&o).contains("--features gpu"), "{}", text(&o));
    }
    let o = run(args("cuda:1", &root.path().join("gpu")));
    if cfg!(feature = "cuda") {
        return; // whether it runs depends on the machine's GPUs
    }
    assert!(!o.status.success());
    assert!(text(&o).contains("built without CUDA"), "{}", text(&o));
}
