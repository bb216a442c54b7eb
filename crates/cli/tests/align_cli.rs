//! `voxspec align` on a LibriTTS-layout tree that has no alignments: it trains an aligner on the
//! tree, writes one TextGrid per utterance mirroring the tree (speaker/chapter), and
//! `voxspec prepare --alignments` then puts every one of them into the manifests; bad input
//! gets one clear error.

use crate::common;

use std::path::{Path, PathBuf};

use common::{text, voxspec};

fn minitts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts")
}

/// Copies utterances `first..first + n` of minitts's speaker 1001, chapter 1 into
/// `<root>/<subset>/1001/1/` as audio and transcript only (no TextGrid).
fn copy_utterances(root: &Path, subset: &str, first: usize, n: usize) {
    let src = minitts().join("train-clean-100/1001/1");
    let dst = root.join(subset).join("1001/1");
    std::fs::create_dir_all(&dst).unwrap();
    for i in first..first + n {
        let id = format!("1001_1_{i:06}_000000");
        for ext in ["flac", "normalized.txt"] {
            let f = format!("{id}.{ext}");
            std::fs::copy(src.join(&f), dst.join(&f)).unwrap();
        }
    }
}

fn aligned_count(summary: &Path) -> u64 {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    v["splits"]
        .as_object()
        .unwrap()
        .values()
        .map(|s| s["aligned"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn aligns_a_libritts_tree_that_prepare_then_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("LibriTTS");
    copy_utterances(&root, "train-clean-100", 1, 5);
    copy_utterances(&root, "dev-clean", 6, 1);
    copy_utterances(&root, "test-clean", 7, 1);
    let data = tmp.path().join("data");
    let prepare = |extra: &[&str]| {
        let mut args = vec![
            "prepare",
            "--corpus",
            root.to_str().unwrap(),
            "--out",
            data.to_str().unwrap(),
            "--force",
        ];
        args.extend_from_slice(extra);
        let o = voxspec(&args);
        assert!(o.status.success(), "{}", text(&o));
    };
    prepare(&[]);
    assert_eq!(aligned_count(&data.join("summary.json")), 0);

    let out = tmp.path().join("alignments");
    let o = voxspec(&[
        "align",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--preset",
        "tiny",
        "--flat-steps",
        "3",
        "--steps",
        "3",
        "--batch",
        "4",
    ]);
    let log = text(&o);
    assert!(o.status.success(), "{log}");
    assert!(log.contains("aligned 7 of 7 utterances"), "{log}");
    for i in 1..=7 {
        let tg = out.join(format!("1001/1/1001_1_{i:06}_000000.TextGrid"));
        let a = voxspec_data::read_textgrid(&tg).unwrap();
        assert_eq!(
            a.phones.first().map(String::as_str),
            Some("sil"),
            "{}",
            tg.display()
        );
        assert!(a.phones.iter().any(|p| p != "sil"));
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["aligned"], 7);
    // no reference alignments in this tree: nothing to compare with
    assert!(report["reference_phones"].is_null());
    assert!(out.join("aligner/model.safetensors").is_file());

    prepare(&["--alignments", out.to_str().unwrap()]);
    assert_eq!(aligned_count(&data.join("summary.json")), 7);

    // Phone-code teacher features from those alignments: every frame is one phone's code.
    let feats = tmp.path().join("phones");
    let o = voxspec(&[
        "teacher",
        "phones",
        "--data",
        data.to_str().unwrap(),
        "--out",
        feats.to_str().unwrap(),
        "--dim",
        "48",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let codes: Vec<Vec<f32>> = (0..voxspec_teacher::PHONE_DIM)
        .map(|p| voxspec_teacher::phone_code(p, 48))
        .collect();
    let mut stored = 0;
    for split in ["train", "dev", "test"] {
        let Ok(store) = voxspec_teacher::FeatureStoreReader::open(&feats, split) else {
            continue;
        };
        assert_eq!(store.meta().teacher, "phones");
        for id in store.ids() {
            let f = store.get(id).unwrap().unwrap();
            assert_eq!(f.dim, 48);
            assert!(f.frames > 10, "{id}: {} frames", f.frames);
            assert!(
                f.data
                    .chunks_exact(48)
                    .all(|row| codes.iter().any(|c| c == row))
            );
            stored += 1;
        }
    }
    assert_eq!(stored, 7);
    let e = voxspec(&[
        "teacher",
        "phones",
        "--data",
        data.to_str().unwrap(),
        "--out",
        tmp.path().join("narrow").to_str().unwrap(),
        "--dim",
        "8",
    ]);
    assert!(!e.status.success());
    assert!(text(&e).contains("at least 40 dimensions"), "{}", text(&e));
    let e = voxspec(&[
        "teacher",
        "phones",
        "--data",
        tmp.path().join("nowhere").to_str().unwrap(),
        "--out",
        tmp.path().join("none").to_str().unwrap(),
    ]);
    assert!(!e.status.success());
    assert!(
        text(&e).contains("no manifest for the splits"),
        "{}",
        text(&e)
    );

    // The trained aligner aligns the tree again without training.
    let again = tmp.path().join("again");
    let o = voxspec(&[
        "align",
        "--data",
        data.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "--aligner",
        out.join("aligner").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read(again.join("1001/1/1001_1_000001_000000.TextGrid")).unwrap(),
        std::fs::read(out.join("1001/1/1001_1_000001_000000.TextGrid")).unwrap()
    );
}

#[test]
fn bad_input_is_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nothing-here");
    let o = voxspec(&[
        "align",
        "--data",
        missing.to_str().unwrap(),
        "--out",
        tmp.path().join("o").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let log = text(&o);
    assert!(log.contains("nothing-here"), "{log}");
    assert!(!log.contains("panicked"), "{log}");

    let o = voxspec(&[
        "align",
        "--data",
        minitts().to_str().unwrap(),
        "--out",
        tmp.path().join("o").to_str().unwrap(),
        "--aligner",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("manifest") || text(&o).contains("config.json"),
        "{}",
        text(&o)
    );
}
