//! Phone alignments: the TextGrid reader, `prepare` attaching alignments to utterances, and the
//! TextGrids shipped with the bundled minitts corpus.

use std::path::{Path, PathBuf};

use voxspec_data::corpus::{manifest_path, read_split};
use voxspec_data::textgrid::{Alignment, parse_textgrid, read_textgrid};
use voxspec_data::{DataError, NoProgress, PrepareConfig, prepare, read_manifest};

/// Long format, as Praat and MFA write it: a words tier first, then the phones tier with an
/// empty (silence) interval and a label with a doubled quote.
const LONG: &str = r#"File type = "ooTextFile"
Object class = "TextGrid"

xmin = 0 
xmax = 1.2 
tiers? <exists> 
size = 2 
item []: 
    item [1]:
        class = "IntervalTier" 
        name = "words" 
        xmin = 0 
        xmax = 1.2 
        intervals: size = 2 
        intervals [1]:
            xmin = 0 
            xmax = 0.3 
            text = "" 
        intervals [2]:
            xmin = 0.3 
            xmax = 1.2 
            text = "a" 
    item [2]:
        class = "IntervalTier" 
        name = "phones" 
        xmin = 0 
        xmax = 1.2 
        intervals: size = 4 
        intervals [1]:
            xmin = 0 
            xmax = 0.3 
            text = "" 
        intervals [2]:
            xmin = 0.3 
            xmax = 0.75 
            text = "AH0" 
        intervals [3]:
            xmin = 0.75 
            xmax = 1.05 
            text = "say ""x""" 
        intervals [4]:
            xmin = 1.05 
            xmax = 1.2 
            text = "sil" 
"#;

/// The same TextGrid in Praat's short format, with a point tier in between.
const SHORT: &str = r#"File type = "ooTextFile"
Object class = "TextGrid"

0
1.2
<exists>
3
"IntervalTier"
"words"
0
1.2
2
0
0.3
""
0.3
1.2
"a"
"TextTier"
"events"
0
1.2
1
0.5
"click"
"IntervalTier"
"phones"
0
1.2
4
0
0.3
""
0.3
0.75
"AH0"
0.75
1.05
"say ""x"""
1.05
1.2
"sil"
"#;

fn expected() -> Alignment {
    Alignment {
        phones: vec!["sil".into(), "AH0".into(), "say \"x\"".into(), "sil".into()],
        ends: vec![0.3, 0.75, 1.05, 1.2],
    }
}

#[test]
fn long_format_gives_the_phones_tier() {
    let a = parse_textgrid(LONG, Path::new("a.TextGrid")).unwrap();
    assert_eq!(a, expected());
    assert_eq!(a.starts(), vec![0.0, 0.3, 0.75, 1.05]);
    assert!((a.durations()[1] - 0.45).abs() < 1e-12);
    assert_eq!(a.end(), 1.2);
}

#[test]
fn short_format_gives_the_same_alignment() {
    assert_eq!(
        parse_textgrid(SHORT, Path::new("a.TextGrid")).unwrap(),
        expected()
    );
}

#[test]
fn files_are_read_as_utf8_with_crlf_or_as_utf16() {
    let dir = tempfile::tempdir().unwrap();
    let crlf = dir.path().join("crlf.TextGrid");
    std::fs::write(&crlf, LONG.replace('\n', "\r\n")).unwrap();
    assert_eq!(read_textgrid(&crlf).unwrap(), expected());
    // Praat writes UTF-16 (with a byte order mark) when a label is not ASCII.
    let utf16 = dir.path().join("utf16.TextGrid");
    let mut bytes = vec![0xFF, 0xFE];
    for u in LONG.replace("AH0", "ə").encode_utf16() {
        bytes.extend_from_slice(&u.to_le_bytes());
    }
    std::fs::write(&utf16, bytes).unwrap();
    assert_eq!(read_textgrid(&utf16).unwrap().phones[1], "ə");
}

#[test]
fn a_tier_whose_name_contains_phone_is_the_fallback() {
    let text = LONG.replace("name = \"phones\"", "name = \"Speaker1 - phone\"");
    assert_eq!(parse_textgrid(&text, Path::new("x")).unwrap(), expected());
}

#[test]
fn gaps_become_silence_and_zero_length_intervals_are_dropped() {
    let text = SHORT
        // the phones tier starts at 0.1 (gap from 0), "AH0" is 0.3..0.3 (zero length),
        // and "say" starts at 0.8 (gap after 0.3)
        .replace(
            "0\n0.3\n\"\"\n0.3\n0.75\n\"AH0\"\n0.75\n",
            "0.1\n0.3\n\"\"\n0.3\n0.3\n\"AH0\"\n0.8\n",
        );
    let a = parse_textgrid(&text, Path::new("x")).unwrap();
    assert_eq!(a.phones, vec!["sil", "sil", "sil", "say \"x\"", "sil"]);
    assert_eq!(a.ends, vec![0.1, 0.3, 0.8, 1.05, 1.2]);
}

/// The message of a reader error, checked to be a `TextGrid` error.
fn textgrid_error(text: &str) -> String {
    match parse_textgrid(text, Path::new("/c/bad.TextGrid")) {
        Err(e @ DataError::TextGrid { .. }) => e.to_string(),
        other => panic!("expected a TextGrid error, got {other:?}"),
    }
}

#[test]
fn malformed_files_are_reported_with_file_and_line() {
    // Line 39 of LONG is the xmax of the phones tier's 3rd interval.
    assert_eq!(LONG.lines().nth(38).unwrap().trim(), "xmax = 1.05");
    let err = textgrid_error(&LONG.replace("xmax = 1.05", "xmax = 1.o5"));
    assert!(
        err.starts_with("/c/bad.TextGrid:39: invalid TextGrid"),
        "{err}"
    );
    assert!(err.contains("1.o5"), "{err}");

    // An interval that starts before the previous one ends (line 42: xmin of the 4th).
    let err = textgrid_error(&LONG.replace("xmin = 1.05", "xmin = 0.9"));
    assert!(err.starts_with("/c/bad.TextGrid:42:"), "{err}");
    assert!(err.contains("before the previous one ends"), "{err}");

    // Truncated: the last interval's text is missing.
    let cut = &LONG[..LONG.rfind("text = \"sil\"").unwrap()];
    let err = textgrid_error(cut);
    assert!(err.starts_with("/c/bad.TextGrid:43:"), "{err}");
    assert!(
        err.contains("file ends where an interval's text was expected"),
        "{err}"
    );

    // A string left open names the line it starts on.
    let err = textgrid_error(&LONG.replace("text = \"sil\"", "text = \"sil"));
    assert!(err.starts_with("/c/bad.TextGrid:44:"), "{err}");
    assert!(err.contains("never closed"), "{err}");

    // Not a TextGrid at all.
    let err = textgrid_error("File type = \"ooTextFile\"\nObject class = \"Pitch 1\"\n");
    assert!(err.starts_with("/c/bad.TextGrid:2:"), "{err}");

    // No phone tier: the tiers present are listed.
    let err = textgrid_error(&LONG.replace("\"phones\"", "\"syllables\""));
    assert!(err.contains("no phone tier"), "{err}");
    assert!(err.contains("\"words\", \"syllables\""), "{err}");
}

#[test]
fn read_textgrid_names_a_missing_file() {
    let err = read_textgrid(Path::new("/nonexistent/x.TextGrid"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/x.TextGrid"), "{err}");
}

// ------------------------------------------------------------------ prepare

fn write_wav(path: &Path, seconds: f64) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for i in 0..(16000.0 * seconds) as usize {
        w.write_sample(((i as f32 * 0.05).sin() * 8000.0) as i16)
            .unwrap();
    }
    w.finalize().unwrap();
}

/// A short-format TextGrid of three phones ending at `end` seconds.
fn textgrid(end: f64) -> String {
    format!(
        "File type = \"ooTextFile\"\nObject class = \"TextGrid\"\n\n0\n{end}\n<exists>\n1\n\
         \"IntervalTier\"\n\"phones\"\n0\n{end}\n3\n0\n0.2\n\"\"\n0.2\n0.5\n\"HH\"\n0.5\n{end}\n\"sil\"\n"
    )
}

/// `<root>/train-clean-100/7/1/<id>.wav` of 1 s with a transcript; returns the chapter dir.
fn add_utt(root: &Path, id: &str) -> PathBuf {
    let dir = root.join("train-clean-100/7/1");
    std::fs::create_dir_all(&dir).unwrap();
    write_wav(&dir.join(format!("{id}.wav")), 1.0);
    std::fs::write(dir.join(format!("{id}.normalized.txt")), "hello.").unwrap();
    dir
}

fn config(root: &Path) -> PrepareConfig {
    PrepareConfig {
        dev_subsets: vec![],
        test_subsets: vec![],
        ..PrepareConfig::libritts(root)
    }
}

#[test]
fn prepare_attaches_alignments_from_beside_the_audio_and_from_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("corpus");
    let aligned_dir = tmp.path().join("mfa");
    // a: TextGrid beside the audio; b: under --alignments as <speaker>/<chapter>/<utt>;
    // c: under --alignments flat; d: none; e: a TextGrid 0.3 s too short (not used).
    let dir = add_utt(&root, "7_1_000001_000000");
    std::fs::write(dir.join("7_1_000001_000000.TextGrid"), textgrid(1.0)).unwrap();
    add_utt(&root, "7_1_000002_000000");
    std::fs::create_dir_all(aligned_dir.join("7/1")).unwrap();
    std::fs::write(
        aligned_dir.join("7/1/7_1_000002_000000.TextGrid"),
        textgrid(0.99),
    )
    .unwrap();
    add_utt(&root, "7_1_000003_000000");
    std::fs::write(
        aligned_dir.join("7_1_000003_000000.TextGrid"),
        textgrid(1.0),
    )
    .unwrap();
    add_utt(&root, "7_1_000004_000000");
    add_utt(&root, "7_1_000005_000000");
    std::fs::write(dir.join("7_1_000005_000000.TextGrid"), textgrid(0.7)).unwrap();

    let out = tmp.path().join("data");
    let cfg = PrepareConfig {
        alignments: Some(aligned_dir.clone()),
        ..config(&root)
    };
    let summary = prepare(&cfg, &out, false, &NoProgress).unwrap().summary;
    let train = read_split(&out, "train").unwrap();
    assert_eq!(train.len(), 5);
    let three = Alignment {
        phones: vec!["sil".into(), "HH".into(), "sil".into()],
        ends: vec![0.2, 0.5, 1.0],
    };
    assert_eq!(train[0].alignment.as_ref(), Some(&three));
    assert_eq!(train[1].alignment.as_ref().map(|a| a.end()), Some(0.99));
    assert_eq!(train[2].alignment.as_ref(), Some(&three));
    assert_eq!(train[3].alignment, None);
    assert_eq!(train[4].alignment, None);
    assert_eq!(summary.splits["train"].aligned, 3);
    assert_eq!(summary.alignment_issues.len(), 1);
    assert!(
        summary.alignment_issues[0]
            .textgrid
            .ends_with("7_1_000005_000000.TextGrid")
    );
    assert!(
        summary.alignment_issues[0]
            .detail
            .contains("ends at 0.700 s"),
        "{:?}",
        summary.alignment_issues
    );
    let shown = summary.to_string();
    assert!(
        shown.contains("alignments: 3 of 5 kept utterances (2 without)"),
        "{shown}"
    );
    // The manifest line of an unaligned utterance has no alignment field.
    let text = std::fs::read_to_string(manifest_path(&out, "train")).unwrap();
    assert_eq!(text.matches("\"alignment\"").count(), 3);

    // Without --alignments only the TextGrid beside the audio is found.
    let out2 = tmp.path().join("data2");
    let s2 = prepare(&config(&root), &out2, false, &NoProgress)
        .unwrap()
        .summary;
    assert_eq!(s2.splits["train"].aligned, 1);
    let m2 = read_manifest(&manifest_path(&out2, "train")).unwrap();
    assert!(m2[0].alignment.is_some() && m2[1].alignment.is_none());
}

#[test]
fn prepare_stops_at_a_malformed_textgrid_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("corpus");
    let dir = add_utt(&root, "7_1_000001_000000");
    let bad = textgrid(1.0).replace("\n0.5\n\"HH\"", "\n0,5\n\"HH\"");
    assert_ne!(bad, textgrid(1.0));
    std::fs::write(dir.join("7_1_000001_000000.TextGrid"), bad).unwrap();
    let err = prepare(&config(&root), &tmp.path().join("data"), false, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("7_1_000001_000000.TextGrid:17: invalid TextGrid"),
        "{err}"
    );
}

#[test]
fn prepare_rejects_a_missing_alignments_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("corpus");
    add_utt(&root, "7_1_000001_000000");
    let cfg = PrepareConfig {
        alignments: Some(tmp.path().join("nowhere")),
        ..config(&root)
    };
    let err = prepare(&cfg, &tmp.path().join("data"), false, &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("nowhere") && err.contains("alignments directory"),
        "{err}"
    );
}

#[test]
fn prepared_before_alignments_existed_is_prepared_again() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("corpus");
    let dir = add_utt(&root, "7_1_000001_000000");
    let out = tmp.path().join("data");
    prepare(&config(&root), &out, false, &NoProgress).unwrap();
    // Make the summary look like one of the old format (no version, no alignment fields) ...
    let summary_file = out.join("summary.json");
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary_file).unwrap()).unwrap();
    let obj = v.as_object_mut().unwrap();
    obj.remove("version");
    obj.remove("alignment_issues");
    obj["config"].as_object_mut().unwrap().remove("alignments");
    std::fs::write(&summary_file, serde_json::to_vec(&v).unwrap()).unwrap();
    // ... then add a TextGrid: the old manifests are not reused, so it is picked up.
    std::fs::write(dir.join("7_1_000001_000000.TextGrid"), textgrid(1.0)).unwrap();
    let outcome = prepare(&config(&root), &out, false, &NoProgress).unwrap();
    assert!(!outcome.reused);
    assert_eq!(outcome.summary.splits["train"].aligned, 1);
    // A rerun now reuses them.
    assert!(
        prepare(&config(&root), &out, false, &NoProgress)
            .unwrap()
            .reused
    );
}

// ------------------------------------------------------------------ the bundled corpus

const ARPABET: [&str; 39] = [
    "AA", "AE", "AH", "AO", "AW", "AY", "B", "CH", "D", "DH", "EH", "ER", "EY", "F", "G", "HH",
    "IH", "IY", "JH", "K", "L", "M", "N", "NG", "OW", "OY", "P", "R", "S", "SH", "T", "TH", "UH",
    "UW", "V", "W", "Y", "Z", "ZH",
];

fn flac_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            flac_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "flac") {
            out.push(p);
        }
    }
}

#[test]
fn every_minitts_utterance_has_a_matching_arpabet_textgrid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts");
    let mut flacs = Vec::new();
    flac_files(&root, &mut flacs);
    assert_eq!(flacs.len(), 640);
    let mut max_diff: f64 = 0.0;
    let mut phones = 0;
    for flac in &flacs {
        let tg = flac.with_extension("TextGrid");
        let a = read_textgrid(&tg).unwrap_or_else(|e| panic!("{e}"));
        a.check()
            .unwrap_or_else(|e| panic!("{}: {e}", tg.display()));
        let duration = voxspec_audio::probe(flac).unwrap().duration_secs();
        let diff = (a.end() - duration).abs();
        assert!(
            diff <= 0.020,
            "{}: ends at {} s, the audio lasts {duration} s",
            tg.display(),
            a.end()
        );
        max_diff = max_diff.max(diff);
        for p in &a.phones {
            assert!(
                p == "sil" || ARPABET.contains(&p.as_str()),
                "{}: label {p:?} is neither ARPAbet nor sil",
                tg.display()
            );
        }
        // Padded with 0.15 s of silence at both ends by make_minitts.sh.
        assert_eq!(a.phones.first().map(String::as_str), Some("sil"));
        assert_eq!(a.phones.last().map(String::as_str), Some("sil"));
        assert!(a.len() >= 5, "{}: {a:?}", tg.display());
        phones += a.phones.iter().filter(|p| *p != "sil").count();
    }
    // The mapping sets the last phone's end to the file's duration.
    assert!(max_diff < 1e-6, "max |end - duration| = {max_diff}");
    assert!(phones > 15_000, "{phones}");
}

#[test]
fn prepare_fills_alignments_for_the_whole_bundled_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts");
    let tmp = tempfile::tempdir().unwrap();
    let cfg = PrepareConfig {
        verify_audio: false,
        ..PrepareConfig::libritts(&root)
    };
    let summary = prepare(&cfg, tmp.path(), false, &NoProgress)
        .unwrap()
        .summary;
    assert_eq!(summary.kept(), 640);
    assert_eq!(summary.aligned(), 640);
    assert!(summary.alignment_issues.is_empty());
    let dev = read_split(tmp.path(), "dev").unwrap();
    assert!(dev.iter().all(|u| u.alignment.is_some()));
}
