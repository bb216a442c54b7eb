//! The language-model side of the `voxspec` binary: transition statistics and the model
//! benchmarks, run as a user would on small inputs.

use std::path::Path;
use std::process::{Command, Output};

use voxspec_data::{Codes, TokenStoreMeta, TokenStoreWriter};
use voxspec_infer::Transitions;

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

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[test]
fn lm_commands_have_help() {
    for args in [
        vec!["stats", "transitions", "--help"],
        vec!["bench", "train", "--help"],
        vec!["bench", "forward", "--help"],
        vec!["groups", "build", "--help"],
        vec!["bench", "acceptance", "--help"],
    ] {
        let o = voxspec(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(text(&o).contains("Usage"), "{args:?}");
    }
}

#[test]
fn transitions_are_counted_from_a_token_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let meta = TokenStoreMeta {
        n_q: 2,
        codebook_size: 4,
        frame_rate: 50.0,
    };
    let mut writer = TokenStoreWriter::new(dir.path(), "train", meta, 1000).expect("writer");
    // Stream 0 cycles 0 → 1 → 2 → 0 …; stream 1 is noise that must be ignored.
    for (i, len) in [7usize, 5, 9].into_iter().enumerate() {
        let s0: Vec<u32> = (0..len as u32).map(|j| j % 3).collect();
        let s1: Vec<u32> = (0..len as u32).map(|j| (j * 3 + 1) % 4).collect();
        let codes = Codes::new(2, len, [s0, s1].concat()).expect("codes");
        writer.push(&format!("utt{i}"), codes).expect("push");
    }
    writer.finish().expect("finish");
    let out = dir.path().join("transitions.safetensors");
    let o = voxspec(&[
        "stats",
        "transitions",
        "--tokens",
        path(dir.path()),
        "--out",
        path(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let q = Transitions::load(&out).expect("load");
    assert_eq!(q.vocab_size(), 5);
    assert_eq!(q.counted(), (3, 7 + 5 + 9));
    for (a, b) in [(0, 1), (1, 2), (2, 0)] {
        for other in 0..5 {
            if other != b {
                assert!(
                    q.log_q(a, b) > q.log_q(a, other),
                    "Q({a}→{b}) vs Q({a}→{other})"
                );
            }
        }
    }
    // Utterances end after codes 0 (len 7), 1 (len 5) and 2 (len 9): EOS (4) follows each once.
    assert!(q.log_q(1, 4) > q.log_q(1, 3));

    let o = voxspec(&[
        "stats",
        "transitions",
        "--tokens",
        path(dir.path()),
        "--split",
        "dev",
        "--out",
        path(&out),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("dev"), "{}", text(&o));
}

#[test]
fn model_benchmarks_write_their_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fwd = dir.path().join("forward.json");
    let o = voxspec(&[
        "bench",
        "forward",
        "--max-k",
        "3",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--codebook",
        "16",
        "--context",
        "20",
        "--repeat",
        "2",
        "--out",
        path(&fwd),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&fwd).expect("report")).expect("json");
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["cost_relative_to_k1"], 1.0);
    let greedy = report["greedy"].as_array().expect("greedy");
    assert_eq!(greedy.len(), 1, "one engine, one greedy row");
    assert!(greedy[0]["ms_per_token"].as_f64().expect("ms") > 0.0);
    assert!(greedy[0]["speedup_over_peer"].is_null());

    // A peer report of the same shape is put beside the run; one of another shape is refused,
    // naming the field.
    let peer = dir.path().join("peer.json");
    let peer_report = |d_model: usize| {
        serde_json::json!({
            "framework": "pytorch 0 + transformers 0",
            "config": {"layers": 1, "d_model": d_model, "d_ff": 128, "n_heads": 8,
                       "context": 20, "vocab": 33},
            "forward": [{"k": 1, "median_ms": 2.0}, {"k": 2, "median_ms": 3.0}],
            "generate_ms_per_token": 4.0,
        })
        .to_string()
    };
    let base = [
        "bench",
        "forward",
        "--max-k",
        "2",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--codebook",
        "16",
        "--context",
        "20",
        "--repeat",
        "2",
        "--generate",
        "4",
        "--peer",
        path(&peer),
        "--out",
        path(&fwd),
    ];
    std::fs::write(&peer, peer_report(32)).expect("peer");
    let o = voxspec(&base);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("faster than the peer's generate"),
        "{}",
        text(&o)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&fwd).expect("report")).expect("json");
    let g = &report["greedy"][0];
    let ratio = g["speedup_over_peer"].as_f64().expect("ratio");
    let ms = g["ms_per_token"].as_f64().expect("ms");
    assert!(
        (ratio - 4.0 / ms).abs() < 1e-9 * ratio,
        "{ratio} vs 4 / {ms}"
    );
    std::fs::write(&peer, peer_report(64)).expect("peer");
    let o = voxspec(&base);
    assert!(!o.status.success());
    assert!(text(&o).contains("d_model = 64"), "{}", text(&o));

    // A preset's random model, the native engine over f32, bf16 and int8 weights in one run,
    // with AR against MTP + Viterbi decoding on each.
    let tiny = [
        "bench",
        "forward",
        "--preset",
        "tiny",
        "--engine",
        "native,native-bf16,native-int8",
        "--weights",
        "bf16,f32,int8",
        "--max-k",
        "2",
        "--codebook",
        "16",
        "--context",
        "20",
        "--repeat",
        "2",
        "--generate",
        "6",
        "--mtp-heads",
        "2",
        "--out",
        path(&fwd),
    ];
    let o = voxspec(&tiny);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&fwd).expect("report")).expect("json");
    assert_eq!(report["config"]["d_model"], 32, "the tiny preset");
    let weights: Vec<&str> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["weights"].as_str().expect("weights"))
        .collect();
    assert_eq!(
        weights,
        [
            "bf16", "bf16", "f32", "f32", "int8", "int8", "bf16", "bf16", "int8", "int8"
        ]
    );
    let floors = report["floors"].as_array().expect("floors");
    assert_eq!(floors[0]["weights"], "f32");
    assert_eq!(floors[1]["weights"], "bf16");
    assert_eq!(floors[2]["weights"], "int8");
    let mb = |i: usize| floors[i]["weight_mb"].as_f64().expect("weight_mb");
    assert!(
        mb(1) < 0.51 * mb(0),
        "bf16 reads half the bytes: {} of {}",
        mb(1),
        mb(0)
    );
    assert!(
        mb(2) < 0.75 * mb(1),
        "int8 reads about half of bf16 (plus a scale per column): {} of {}",
        mb(2),
        mb(1)
    );
    // AR then MTP + Viterbi for each engine and format, the speed-up against that AR.
    let decoders = report["decoders"].as_array().expect("decoders");
    assert_eq!(decoders.len(), 10);
    for pair in decoders.chunks(2) {
        assert_eq!(pair[0]["decoder"], "ar");
        assert_eq!(pair[1]["decoder"], "mtp+viterbi k=2 top_k=3");
        assert_eq!(pair[0]["weights"], pair[1]["weights"]);
        assert_eq!(pair[0]["speedup_over_ar"].as_f64(), Some(1.0));
        let (ar, mtp) = (
            pair[0]["ms_per_token"].as_f64().expect("ms"),
            pair[1]["ms_per_token"].as_f64().expect("ms"),
        );
        let speedup = pair[1]["speedup_over_ar"].as_f64().expect("speed-up");
        assert!(ar > 0.0 && mtp > 0.0);
        assert!((speedup - ar / mtp).abs() < 1e-9 * speedup, "{speedup}");
    }
    // More heads than tokens, or than the model has, is refused with the numbers.
    let mut more = tiny.to_vec();
    let at = more.iter().position(|a| *a == "--generate").expect("flag") + 1;
    more[at] = "1";
    let o = voxspec(&more);
    assert!(!o.status.success());
    assert!(text(&o).contains("--mtp-heads 2"), "{}", text(&o));
    let bad = voxspec(&["bench", "forward", "--weights", "f16", "--out", path(&fwd)]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("f16"), "{}", text(&bad));

    let train = dir.path().join("train.json");
    let small = [
        "--layers",
        "1",
        "--d-model",
        "32",
        "--heads",
        "2",
        "--vocab",
        "64",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--warmup",
        "1",
        "--steps",
        "2",
    ];
    let mut args = vec!["bench", "train", "--out", path(&train)];
    args.extend(small);
    let o = voxspec(&args);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train).expect("report")).expect("json");
    assert_eq!(report["timed_steps"], 2);
    let tps = report["tokens_per_second"].as_f64().expect("tps");
    assert!(tps > 0.0);
    // No peer measured alongside: no ratio (a constant from another day is not a peer).
    assert!(report["ratio_to_peer"].is_null(), "{report}");
    assert!(!text(&o).contains("tokens/s ("), "{}", text(&o));

    // A peer report of the same config gives the ratio; one of another config is refused.
    let config = serde_json::json!({
        "layers": 1, "d_model": 32, "heads": 2, "vocab": 64, "batch": 2, "seq_len": 16,
        "norm": "layer", "positions": "learned", "mlp": "gelu", "optimizer": "adamw",
    });
    let peer = dir.path().join("peer.json");
    let write_peer = |config: &serde_json::Value| {
        let json = serde_json::json!({
            "framework": "pytorch 2.9", "config": config, "tokens_per_second": 100.0,
        });
        std::fs::write(&peer, json.to_string()).expect("peer");
    };
    write_peer(&config);
    args.extend(["--peer", path(&peer)]);
    let o = voxspec(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("x pytorch 2.9's 100 tokens/s"),
        "{}",
        text(&o)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train).expect("report")).expect("json");
    let ratio = report["ratio_to_peer"].as_f64().expect("ratio");
    let tps = report["tokens_per_second"].as_f64().expect("tps");
    assert!((ratio - tps / 100.0).abs() < 1e-9);
    let mut other = config.clone();
    other["seq_len"] = 32.into();
    write_peer(&other);
    let o = voxspec(&args);
    assert!(!o.status.success());
    assert!(text(&o).contains("seq_len = 32"), "{}", text(&o));

    // --profile: phases and families in the report and the table, the peer's profile beside.
    let json = serde_json::json!({
        "framework": "pytorch 2.9", "config": config, "tokens_per_second": 100.0,
        "dtype": "f32",
        "profile": {"phases": {"data": 0.001, "forward": 0.01, "backward": 0.02,
                               "optimizer": 0.003},
                    "families": [{"family": "matmul (linear layers)", "seconds": 0.012}]},
    });
    std::fs::write(&peer, json.to_string()).expect("peer");
    let mut profiled = args.clone();
    profiled.extend(["--profile", "--profile-repeat", "2"]);
    let o = voxspec(&profiled);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train).expect("report")).expect("json");
    for phase in ["data", "forward", "backward", "optimizer"] {
        let secs = report["phases"][phase].as_f64().expect(phase);
        assert!(secs > 0.0, "{phase}: {report}");
    }
    let families = report["ops"]["families"].as_array().expect("families");
    assert_eq!(families.len(), 11, "{report}");
    assert!(report["unattributed_seconds"].is_number(), "{report}");
    assert_eq!(report["float"], "f32");
    assert_eq!(report["device"], "cpu");
    for shown in [
        "LayerNorm",
        "linear: LM head (32 → 64)",
        "peer matmul (linear layers)",
    ] {
        assert!(text(&o).contains(shown), "{shown}: {}", text(&o));
    }
    // A peer that computed in another type is refused; the run itself can compute in bf16.
    let mut bf16 = args.clone();
    bf16.extend(["--float", "bf16"]);
    let o = voxspec(&bf16);
    assert!(!o.status.success());
    assert!(text(&o).contains("--dtype bf16"), "{}", text(&o));
    let bf16: Vec<&str> = bf16
        .into_iter()
        .filter(|a| *a != "--peer" && *a != path(&peer))
        .collect();
    let o = voxspec(&bf16);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&train).expect("report")).expect("json");
    assert_eq!(report["float"], "bf16");
    assert!(report["tokens_per_second"].as_f64().expect("tps") > 0.0);

    // Mixed precision (`--matmul bf16`): a peer in f32 is accepted beside it; pure bf16 tensors
    // do not combine with it; a CPU without AMX-BF16 or AVX512-BF16 is told so.
    let mut mixed = args.clone();
    mixed.extend(["--matmul", "bf16"]);
    let o = voxspec(&mixed);
    if voxspec_nn::bf16_gemm::kernel().is_some() {
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("(bf16 matmuls)"), "{}", text(&o));
        assert!(
            text(&o).contains("in f32 measured alongside"),
            "{}",
            text(&o)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&train).expect("report")).expect("json");
        assert_eq!(report["matmul"], "bf16");
        assert_eq!(report["float"], "f32");
    } else {
        assert!(!o.status.success());
        assert!(text(&o).contains("AVX512-BF16"), "{}", text(&o));
    }
    mixed.extend(["--float", "bf16"]);
    let o = voxspec(&mixed);
    assert!(!o.status.success());
    assert!(text(&o).contains("does not combine"), "{}", text(&o));
}

#[test]
fn groups_are_built_from_a_models_code_embeddings() {
    use burn::tensor::Device;
    use voxspec_infer::SimilarityGroups;
    use voxspec_mtp::{MtpConfig, MtpFile, save_mtp};

    let dir = tempfile::tempdir().expect("tempdir");
    let device = Device::flex();
    let config = MtpConfig::tiny(5, 12);
    let model = config.init(&device).expect("model");
    save_mtp(
        dir.path(),
        &MtpFile {
            model: config,
            draft: None,
        },
        &model,
    )
    .expect("save");
    let o = voxspec(&[
        "groups",
        "build",
        "--checkpoint",
        path(dir.path()),
        "--theta",
        "0.2",
        "--sweep",
        "-0.5,0.2,0.9",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("| 0.9 |"), "{}", text(&o));
    let groups = SimilarityGroups::load(&dir.path().join("groups.safetensors")).expect("load");
    assert_eq!(groups.vocab(), 13);
    // End-of-speech (12) is never an input: it is alone in its group.
    assert_eq!(groups.groups_of(12).len(), 1);
    assert_eq!(groups.members(groups.groups_of(12)[0] as usize), &[12]);
    // Every code is in its own group at least.
    assert!((0..12).all(|t| {
        groups
            .groups_of(t)
            .iter()
            .any(|&g| groups.members(g as usize).contains(&t))
    }));

    // θ from a target mean size; a θ that leaves only singletons is warned about.
    let out = dir.path().join("sized.safetensors");
    let o = voxspec(&[
        "groups",
        "build",
        "--checkpoint",
        path(dir.path()),
        "--mean-size",
        "3",
        "--out",
        path(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let sized = SimilarityGroups::load(&out).expect("load");
    assert!(
        (sized.mean_group_size() - 3.0).abs() < 1.0,
        "{}",
        sized.mean_group_size()
    );
    assert!(!text(&o).contains("warning"), "{}", text(&o));
    let o = voxspec(&[
        "groups",
        "build",
        "--checkpoint",
        path(dir.path()),
        "--theta",
        "0.99",
        "--out",
        path(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("warning: every group"), "{}", text(&o));

    let o = voxspec(&[
        "groups",
        "build",
        "--checkpoint",
        path(dir.path()),
        "--theta",
        "1.5",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("theta"), "{}", text(&o));
    let o = voxspec(&[
        "groups",
        "build",
        "--checkpoint",
        path(&dir.path().join("none")),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("config.json"), "{}", text(&o));
}
