//! End-to-end tests of corpus preparation on trees built here and on the bundled corpus.

use std::path::{Path, PathBuf};

use voxspec::data::corpus::{SkipReason, manifest_path, read_split};
use voxspec::data::{NoProgress, PrepareConfig, prepare};

fn write_wav(path: &Path, rate: u32, channels: u16, seconds: f32) {
    let spec = hound::WavSpec {
        channels,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    let n = (rate as f32 * seconds) as usize;
    for i in 0..n {
        let v =
            (0.3 * (i as f32 * 440.0 * std::f32::consts::TAU / rate as f32).sin() * 32767.0) as i16;
        for _ in 0..channels {
            w.write_sample(v).unwrap();
        }
    }
    w.finalize().unwrap();
}

struct Utt<'a> {
    subset: &'a str,
    speaker: &'a str,
    id: &'a str,
}

fn chapter_dir(root: &Path, u: &Utt<'_>) -> PathBuf {
    let d = root.join(u.subset).join(u.speaker).join("100");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn add(root: &Path, u: Utt<'_>, rate: u32, channels: u16, seconds: f32, text: Option<&str>) {
    let d = chapter_dir(root, &u);
    write_wav(&d.join(format!("{}.wav", u.id)), rate, channels, seconds);
    if let Some(t) = text {
        std::fs::write(d.join(format!("{}.normalized.txt", u.id)), t).unwrap();
        std::fs::write(d.join(format!("{}.original.txt", u.id)), t.to_uppercase()).unwrap();
    }
}

/// A LibriTTS-layout tree with one of each kind of bad file.
fn build_tree(root: &Path) {
    let u = |subset, speaker, id| Utt {
        subset,
        speaker,
        id,
    };
    add(
        root,
        u("train-clean-100", "19", "19_100_000001_000000"),
        16000,
        1,
        1.0,
        Some("first good one."),
    );
    add(
        root,
        u("train-clean-100", "19", "19_100_000002_000000"),
        24000,
        1,
        2.0,
        Some("second good one."),
    );
    // A stereo 44.1 kHz file is kept, with its native rate.
    add(
        root,
        u("train-clean-100", "27", "27_100_000001_000000"),
        44100,
        2,
        1.5,
        Some("stereo file."),
    );
    // Missing transcript.
    add(
        root,
        u("train-clean-100", "27", "27_100_000002_000000"),
        16000,
        1,
        1.0,
        None,
    );
    // Corrupt: random bytes with a .wav name.
    let d = chapter_dir(root, &u("train-clean-100", "27", "x"));
    std::fs::write(
        d.join("27_100_000003_000000.wav"),
        b"RIFF\x10\x00\x00\x00garbage that is no wave",
    )
    .unwrap();
    std::fs::write(d.join("27_100_000003_000000.normalized.txt"), "corrupt.").unwrap();
    // Zero-length file.
    std::fs::write(d.join("27_100_000004_000000.wav"), b"").unwrap();
    std::fs::write(d.join("27_100_000004_000000.normalized.txt"), "empty.").unwrap();
    // Too long for a 10 s bound; and an empty transcript.
    add(
        root,
        u("train-clean-100", "27", "27_100_000005_000000"),
        16000,
        1,
        12.0,
        Some("long."),
    );
    add(
        root,
        u("train-clean-100", "27", "27_100_000006_000000"),
        16000,
        1,
        1.0,
        Some("  \n"),
    );
    // Transcript-less companion files of LibriTTS are ignored.
    std::fs::write(d.join("27_100.trans.tsv"), "ignored").unwrap();
    add(
        root,
        u("dev-clean", "84", "84_100_000001_000000"),
        16000,
        1,
        1.0,
        Some("dev one."),
    );
    add(
        root,
        u("test-clean", "61", "61_100_000001_000000"),
        16000,
        1,
        0.2,
        Some("too short."),
    );
    add(
        root,
        u("test-clean", "61", "61_100_000002_000000"),
        16000,
        1,
        1.0,
        Some("test one."),
    );
}

fn config(root: &Path) -> PrepareConfig {
    PrepareConfig {
        max_duration: 10.0,
        ..PrepareConfig::libritts(root)
    }
}

#[test]
fn libritts_tree_with_bad_files_gives_right_manifests_and_skip_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("LibriTTS");
    build_tree(&root);
    let out = tmp.path().join("manifests");
    let outcome = prepare(&config(&root), &out, false, &NoProgress).unwrap();
    assert!(!outcome.reused);
    let s = &outcome.summary;

    let train = read_split(&out, "train").unwrap();
    let ids: Vec<&str> = train.iter().map(|u| u.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "19_100_000001_000000",
            "19_100_000002_000000",
            "27_100_000001_000000"
        ]
    );
    let stereo = &train[2];
    assert_eq!(stereo.sample_rate, 44100);
    assert!((stereo.duration - 1.5).abs() < 1e-3, "{}", stereo.duration);
    assert_eq!(stereo.speaker, "27");
    assert_eq!(stereo.chapter, "100");
    assert_eq!(
        stereo.text, "stereo file.",
        "normalized transcript is preferred"
    );
    assert!(Path::new(&stereo.path).is_absolute());
    assert_eq!(train[1].sample_rate, 24000);
    assert!((train[1].duration - 2.0).abs() < 1e-3);

    let train_s = &s.splits["train"];
    assert_eq!(train_s.kept, 3);
    assert_eq!(train_s.speakers, 2);
    assert_eq!(train_s.skipped.get(&SkipReason::NoTranscript), Some(&1));
    assert_eq!(train_s.skipped.get(&SkipReason::UnreadableAudio), Some(&1));
    assert_eq!(train_s.skipped.get(&SkipReason::EmptyAudio), Some(&1));
    assert_eq!(train_s.skipped.get(&SkipReason::TooLong), Some(&1));
    assert_eq!(train_s.skipped.get(&SkipReason::EmptyTranscript), Some(&1));
    assert_eq!(s.splits["dev"].kept, 1);
    assert_eq!(s.splits["test"].kept, 1);
    assert_eq!(
        s.splits["test"].skipped.get(&SkipReason::TooShort),
        Some(&1)
    );
    assert_eq!(s.skipped.len(), 6);
    let corrupt = s
        .skipped
        .iter()
        .find(|k| k.reason == SkipReason::UnreadableAudio)
        .unwrap();
    assert!(corrupt.path.ends_with("27_100_000003_000000.wav"));

    // The summary on disk says the same.
    let on_disk: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(on_disk["splits"]["train"]["skipped"]["unreadable_audio"], 1);
    assert_eq!(on_disk["splits"]["test"]["skipped"]["too_short"], 1);
    // The printed table names each reason.
    let table = s.to_string();
    assert!(
        table.contains("no_transcript=1") && table.contains("too_short=1"),
        "{table}"
    );
}

#[test]
fn rerun_is_idempotent_force_rebuilds_and_changed_settings_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("LibriTTS");
    build_tree(&root);
    let out = tmp.path().join("manifests");
    prepare(&config(&root), &out, false, &NoProgress).unwrap();
    let train_file = manifest_path(&out, "train");
    let before = std::fs::metadata(&train_file).unwrap().modified().unwrap();

    let again = prepare(&config(&root), &out, false, &NoProgress).unwrap();
    assert!(again.reused);
    assert_eq!(
        std::fs::metadata(&train_file).unwrap().modified().unwrap(),
        before
    );

    let other = PrepareConfig {
        max_duration: 20.0,
        ..config(&root)
    };
    let err = prepare(&other, &out, false, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("max_duration") && err.contains("--force"),
        "{err}"
    );

    let forced = prepare(&other, &out, true, &NoProgress).unwrap();
    assert!(!forced.reused);
    assert_eq!(
        forced.summary.splits["train"].kept, 4,
        "the 12 s file now fits"
    );
}

#[test]
fn missing_subset_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("LibriTTS");
    build_tree(&root);
    let cfg = PrepareConfig {
        train_subsets: vec!["train-clean-360".into()],
        ..config(&root)
    };
    let err = prepare(&cfg, &tmp.path().join("m"), false, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("train-clean-360") && err.contains("train-clean-100"),
        "{err}"
    );
}

#[test]
fn plain_layout_splits_by_stable_hash() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mine");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..40 {
        let id = format!("alice_{i:03}");
        write_wav(&root.join(format!("{id}.wav")), 16000, 1, 0.6);
        std::fs::write(
            root.join(format!("{id}.txt")),
            format!("sentence number {i}."),
        )
        .unwrap();
    }
    write_wav(&root.join("lonely.wav"), 16000, 1, 0.6);
    let cfg = PrepareConfig {
        dev_fraction: 0.2,
        test_fraction: 0.2,
        ..PrepareConfig::plain(&root)
    };
    let out = tmp.path().join("m");
    let s = prepare(&cfg, &out, false, &NoProgress).unwrap().summary;
    let kept: usize = s.splits.values().map(|x| x.kept).sum();
    assert_eq!(kept, 40);
    assert_eq!(s.skipped_count(SkipReason::NoTranscript), 1);
    for split in ["train", "dev", "test"] {
        assert!(s.splits[split].kept > 0, "{split} is empty: {s}");
    }
    let train = read_split(&out, "train").unwrap();
    assert!(train.iter().all(|u| u.speaker == "alice"));
    // The same split on a second run in a new place.
    let out2 = tmp.path().join("m2");
    let s2 = prepare(&cfg, &out2, false, &NoProgress).unwrap().summary;
    assert_eq!(
        read_split(&out2, "dev").unwrap(),
        read_split(&out, "dev").unwrap()
    );
    assert_eq!(s2.splits, s.splits);
}

#[test]
fn bundled_corpus_prepares_completely() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/minitts");
    let tmp = tempfile::tempdir().unwrap();
    let outcome = prepare(
        &PrepareConfig::libritts(&root),
        tmp.path(),
        false,
        &NoProgress,
    )
    .unwrap();
    let s = &outcome.summary;
    // Every FLAC in each subset is kept: the corpus has no bad file.
    for (split, subset) in [
        ("train", "train-clean-100"),
        ("dev", "dev-clean"),
        ("test", "test-clean"),
    ] {
        let mut n = 0;
        count_flac(&root.join(subset), &mut n);
        assert_eq!(s.splits[split].kept, n, "{split}");
        assert!(s.splits[split].skipped.is_empty(), "{split}: {s}");
    }
    let total: usize = s.splits.values().map(|x| x.kept).sum();
    assert!(total >= 600, "{total}");
    assert_eq!(s.splits["test"].speakers, 2);
    let train = read_split(tmp.path(), "train").unwrap();
    let test = read_split(tmp.path(), "test").unwrap();
    assert!(
        test.iter()
            .all(|t| train.iter().all(|u| u.speaker != t.speaker)),
        "test speakers are unseen in training"
    );
    assert!(
        train
            .iter()
            .all(|u| u.sample_rate == 16000 && !u.text.is_empty())
    );
}

fn count_flac(dir: &Path, n: &mut usize) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            count_flac(&p, n);
        } else if p.extension().is_some_and(|x| x == "flac") {
            *n += 1;
        }
    }
}
