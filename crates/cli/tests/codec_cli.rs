//! `voxspec codec train | encode | decode | extract`, run as a user would, on a 4-utterance
//! plain-layout corpus written by the test (22.05 kHz WAVs, so every command resamples) with
//! teacher features written directly at 25 Hz (half the codec's 50 Hz frame rate).

use crate::common;

use std::path::{Path, PathBuf};

use voxspec_audio::{Audio, WavFormat, resampled_len, write_wav};
use voxspec_data::{TokenStore, read_manifest};
use voxspec_teacher::{FeatureStoreMeta, FeatureStoreWriter, Features};

use common::{fail, ok, s};

const RATE: u32 = 22050;
const HOP: usize = 320;

/// Four utterances of chirps and noise, 0.7–1.3 s, prepared into train.jsonl (no dev/test).
fn corpus(dir: &Path) -> (PathBuf, Vec<usize>) {
    let root = dir.join("corpus");
    std::fs::create_dir_all(&root).unwrap();
    let mut lengths = Vec::new();
    let mut seed = 12345u64;
    for i in 0..4 {
        let n = (RATE as f64 * (0.7 + 0.2 * i as f64)) as usize;
        let samples: Vec<f32> = (0..n)
            .map(|t| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let noise = ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5;
                let f = 200.0 + 150.0 * i as f32 + 300.0 * t as f32 / n as f32;
                0.3 * (std::f32::consts::TAU * f * t as f32 / RATE as f32).sin() + 0.05 * noise
            })
            .collect();
        lengths.push(n);
        let name = format!("spk{i}_utt{i}");
        write_wav(
            &root.join(format!("{name}.wav")),
            &Audio::new(samples, RATE),
            WavFormat::Pcm16,
        )
        .unwrap();
        std::fs::write(
            root.join(format!("{name}.txt")),
            format!("utterance number {i}"),
        )
        .unwrap();
    }
    let data = dir.join("data");
    ok(&[
        "prepare",
        "--corpus",
        s(&root),
        "--out",
        s(&data),
        "--layout",
        "plain",
        "--dev-fraction",
        "0",
        "--test-fraction",
        "0",
    ]);
    (data, lengths)
}

/// Teacher features for the train split: 6-d at 25 Hz, a ramp per utterance.
fn features(dir: &Path, data: &Path) -> PathBuf {
    let out = dir.join("features");
    let meta = FeatureStoreMeta {
        dim: 6,
        frame_rate: 25.0,
        sample_rate: 16000,
        teacher: "test".into(),
        layer: "0".into(),
    };
    let mut w = FeatureStoreWriter::new(&out, "train", meta, 10_000).unwrap();
    for u in read_manifest(&data.join("train.jsonl")).unwrap() {
        let frames = (u.duration * 25.0).ceil() as usize;
        let data = (0..frames * 6).map(|k| (k as f32 * 0.01).sin()).collect();
        w.push(
            &u.id,
            Features {
                frames,
                dim: 6,
                data,
            },
        )
        .unwrap();
    }
    w.finish().unwrap();
    out
}

/// `codec train` of the tiny preset on `data` with `feats` into `out` (batch 2 × 0.4 s, no
/// validation or checkpoints) plus `extra` flags; returns its output.
fn train_codec(data: &Path, feats: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "codec",
        "train",
        "--data",
        s(data),
        "--teacher-features",
        s(feats),
        "--out",
        s(out),
        "--preset",
        "tiny",
        "--batch",
        "2",
        "--segment",
        "0.4",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

fn train_tiny(dir: &Path, data: &Path, feats: &Path) -> PathBuf {
    let run = dir.join("run");
    let out = train_codec(data, feats, &run, &["--steps", "2"]);
    assert!(out.contains("trained 2 steps"), "{out}");
    assert!(out.contains("6-d at 25 Hz"), "{out}");
    run
}

/// Reads the codes tensor `[n_q, frames]` of a `codec encode` file.
fn read_codes(path: &Path) -> (Vec<usize>, Vec<i64>) {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let t = st.tensor("codes").unwrap();
    assert_eq!(t.dtype(), safetensors::Dtype::I64);
    let data = t
        .data()
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (t.shape().to_vec(), data)
}

#[test]
fn help_explains_the_commands() {
    for sub in ["train", "encode", "decode", "extract"] {
        ok(&["codec", sub, "--help"]);
    }
    let help = ok(&["codec", "train", "--help"]);
    for flag in [
        "--data",
        "--teacher-features",
        "--out",
        "--preset",
        "--steps",
        "--adversarial",
        "--resume",
        "Ctrl-C",
        "model.safetensors",
    ] {
        assert!(help.contains(flag), "codec train --help lacks {flag}");
    }
}

#[test]
fn train_extract_encode_decode_round_trip() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (data, lengths) = corpus(dir);
    let feats = features(dir, &data);
    let run = train_tiny(dir, &data, &feats);
    assert!(run.join("model.safetensors").is_file());
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["kind"], "speechtokenizer");
    assert_eq!(config["model"]["semantic_dimension"], 6);
    assert_eq!(config["model"]["n_q"], 4);

    // A run directory with checkpoints is not reused without --resume.
    let again = fail(&[
        "codec",
        "train",
        "--data",
        s(&data),
        "--out",
        s(&run),
        "--preset",
        "tiny",
        "--steps",
        "2",
    ]);
    assert!(again.contains("--resume"), "{again}");

    // Fine-tuning: --init starts from the trained weights. A start codec trained with a large
    // learning rate; with a vanishing one after it, every trained (non-codebook) tensor stays
    // the start's, while a fresh run's stay at their initialisation, far from it.
    let tuned = dir.join("tuned");
    let fine_tune = |out: &Path, init: Option<&Path>, lr: &str| {
        let mut extra = vec!["--steps", "2", "--lr", lr, "--warmup", "0"];
        if let Some(init) = init {
            extra.extend(["--init", s(init)]);
        }
        train_codec(&data, &feats, out, &extra)
    };
    let start_dir = dir.join("start");
    fine_tune(&start_dir, None, "0.05");
    let out = fine_tune(&tuned, Some(&start_dir), "1e-30");
    assert!(out.contains("starting from the codec"), "{out}");
    let fresh = dir.join("fresh");
    fine_tune(&fresh, None, "1e-30");
    let weights = |d: &Path| {
        let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        st.tensors()
            .into_iter()
            .filter(|(name, _)| {
                !["embed", "cluster_size", "inited"]
                    .iter()
                    .any(|b| name.contains(b))
            })
            .map(|(name, v)| {
                let x: Vec<f32> = v
                    .data()
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                    .collect();
                (name, x)
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (start, tuned_w, fresh_w) = (weights(&start_dir), weights(&tuned), weights(&fresh));
    assert!(start.len() > 10, "{:?}", start.keys());
    let max_diff =
        |a: &[f32], b: &[f32]| a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    for (name, w) in &start {
        assert!(
            max_diff(w, &tuned_w[name]) < 1e-6,
            "{name} moved away from the --init codec"
        );
    }
    assert!(
        start
            .iter()
            .any(|(name, w)| max_diff(w, &fresh_w[name]) > 1e-2),
        "a fresh run has the trained weights"
    );
    // --init and --resume exclude each other (a usage error: exit code 2).
    let both = common::voxspec(&[
        "codec",
        "train",
        "--data",
        s(&data),
        "--out",
        s(&tuned),
        "--init",
        s(&run),
        "--resume",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let both = common::text(&both);
    assert!(
        both.contains("--init") && both.contains("--resume"),
        "{both}"
    );

    // Extract: every utterance, frames = ceil(resampled samples / hop), codes in range.
    let tokens = dir.join("tokens");
    let out = ok(&[
        "codec",
        "extract",
        "--codec",
        s(&run),
        "--data",
        s(&data),
        "--out",
        s(&tokens),
        "--batch",
        "3",
    ]);
    assert!(out.contains("train: 4 utterances written"), "{out}");
    let store = TokenStore::open(&tokens, "train").unwrap();
    assert_eq!(store.len(), 4);
    assert_eq!(store.meta().n_q, 4);
    assert_eq!(store.meta().codebook_size, 32);
    assert!((store.meta().frame_rate - 50.0).abs() < 1e-6);
    let utts = read_manifest(&data.join("train.jsonl")).unwrap();
    let mut frame_counts = Vec::new();
    for u in &utts {
        let codes = store.get(&u.id).unwrap();
        let i: usize = u.id[3..4].parse().unwrap();
        let samples = resampled_len(lengths[i], RATE, 16000);
        assert_eq!(codes.n_q, 4);
        assert_eq!(codes.n_frames, samples.div_ceil(HOP), "{}", u.id);
        assert!(codes.data.iter().all(|&c| c < 32));
        frame_counts.push(codes.n_frames);
    }
    // Distinct lengths give distinct frame counts: the check is not vacuous.
    frame_counts.sort_unstable();
    frame_counts.dedup();
    assert_eq!(frame_counts.len(), 4);

    // Resume: a second run encodes nothing and leaves the store as it was.
    let out = ok(&[
        "codec",
        "extract",
        "--codec",
        s(&run),
        "--data",
        s(&data),
        "--out",
        s(&tokens),
    ]);
    assert!(
        out.contains("train: 0 utterances written (0 frames), 4 already there"),
        "{out}"
    );
    assert_eq!(TokenStore::open(&tokens, "train").unwrap().len(), 4);

    // Encode one file with 2 layers: the same codes as the store's first two streams.
    let u = &utts[1];
    let codes_file = dir.join("codes.safetensors");
    ok(&[
        "codec",
        "encode",
        "--codec",
        s(&run),
        &u.path,
        "-o",
        s(&codes_file),
        "--n-q",
        "2",
    ]);
    let (shape, enc) = read_codes(&codes_file);
    let stored = store.get(&u.id).unwrap();
    assert_eq!(shape, vec![2, stored.n_frames]);
    let expected: Vec<i64> = stored.data[..2 * stored.n_frames]
        .iter()
        .map(|&c| i64::from(c))
        .collect();
    assert_eq!(enc, expected);

    // Decode: a 16 kHz WAV of the encoded length.
    let wav = dir.join("out.wav");
    ok(&[
        "codec",
        "decode",
        "--codec",
        s(&run),
        s(&codes_file),
        "-o",
        s(&wav),
    ]);
    let audio = voxspec_audio::load(&wav).unwrap();
    assert_eq!(audio.sample_rate, 16000);
    // Plain 16-bit PCM (format tag 1 in a 16-byte fmt chunk), which every WAV reader opens.
    let bytes = std::fs::read(&wav).unwrap();
    assert_eq!(&bytes[12..16], b"fmt ");
    assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 16);
    assert_eq!(u16::from_le_bytes([bytes[20], bytes[21]]), 1);
    assert_eq!(u16::from_le_bytes([bytes[34], bytes[35]]), 16);
    let i: usize = u.id[3..4].parse().unwrap();
    assert_eq!(audio.samples.len(), resampled_len(lengths[i], RATE, 16000));
    assert!(audio.samples.iter().all(|x| x.is_finite()));

    // --n-q beyond the codec is refused.
    let e = fail(&[
        "codec",
        "encode",
        "--codec",
        s(&run),
        &u.path,
        "-o",
        s(&codes_file),
        "--n-q",
        "5",
    ]);
    assert!(e.contains("--n-q 5"), "{e}");
}

#[test]
fn bad_inputs_fail_with_clear_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (data, _) = corpus(dir);
    let feats = features(dir, &data);
    let run = train_tiny(dir, &data, &feats);
    let utts = read_manifest(&data.join("train.jsonl")).unwrap();

    // Not audio.
    let junk = dir.join("junk.wav");
    std::fs::write(&junk, "this is text").unwrap();
    let e = fail(&[
        "codec",
        "encode",
        "--codec",
        s(&run),
        s(&junk),
        "-o",
        s(&dir.join("c.safetensors")),
    ]);
    assert!(e.contains("junk.wav is not readable audio"), "{e}");

    // Not a codes file.
    let e = fail(&[
        "codec",
        "decode",
        "--codec",
        s(&run),
        s(&junk),
        "-o",
        s(&dir.join("o.wav")),
    ]);
    assert!(e.contains("not a safetensors codes file"), "{e}");

    // A config that does not match the weights: names and both shapes.
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(run.join("model.safetensors"), bad.join("model.safetensors")).unwrap();
    let config = std::fs::read_to_string(run.join("config.json"))
        .unwrap()
        .replace("\"codebook_size\": 32", "\"codebook_size\": 64");
    std::fs::write(bad.join("config.json"), config).unwrap();
    let e = fail(&[
        "codec",
        "encode",
        "--codec",
        s(&bad),
        &utts[0].path,
        "-o",
        s(&dir.join("c.safetensors")),
    ]);
    assert!(
        e.contains("shape of quantizer.layers.0.codebook.embed: model [64, 16], file [32, 16]"),
        "{e}"
    );

    // A segment given in samples instead of seconds: refused before anything is allocated.
    let e = fail(&[
        "codec",
        "train",
        "--data",
        s(&data),
        "--out",
        s(&dir.join("long")),
        "--segment",
        "16000",
    ]);
    assert!(
        e.contains("`segment`: 16000 s: a training segment is given in seconds"),
        "{e}"
    );

    // A manifest whose duration disagrees with the audio: refused naming the utterance.
    let stale = dir.join("stale");
    std::fs::create_dir_all(&stale).unwrap();
    let mut u = utts[2].clone();
    u.duration += 0.5;
    voxspec_data::write_manifest(&stale.join("train.jsonl"), &[u.clone()]).unwrap();
    let e = fail(&[
        "codec",
        "extract",
        "--codec",
        s(&run),
        "--data",
        s(&stale),
        "--out",
        s(&dir.join("tokens")),
    ]);
    assert!(e.contains(&format!("utterance {}", u.id)), "{e}");
    assert!(e.contains("manifest duration"), "{e}");

    // A model directory of another kind.
    let e = fail(&[
        "codec",
        "encode",
        "--codec",
        s(&feats),
        &utts[0].path,
        "-o",
        s(&dir.join("c.safetensors")),
    ]);
    assert!(e.contains("config.json"), "{e}");
}
