//! `voxspec synthesize` and `voxspec bench decode` end to end on tiny models trained for a few
//! steps on a slice of the bundled corpus (codec, CTC teacher, AR model with 4 heads, NAR, a
//! draft): the WAV is written at the codec's rate, the benchmark has one row per decoder, and at
//! temperature 0 the exact speculative decoders reproduce AR's tokens (same count, same NLL).
//! Bad input fails with exit code 1 and a message.

use crate::common;

use std::path::Path;

use common::{fail, finite, models, ok, prepared, read_json, s};

fn train_lm(kind: &[&str], data: &Path, tokens: &Path, out: &Path) {
    let mut args: Vec<&str> = vec!["train"];
    args.extend_from_slice(kind);
    args.extend_from_slice(&[
        "--data",
        s(data),
        "--tokens",
        s(tokens),
        "--out",
        s(out),
        "--steps",
        "2",
        "--warmup",
        "1",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
    ]);
    ok(&args);
}

#[test]
fn synthesize_and_bench_every_decoder() {
    let dir = tempfile::tempdir().unwrap();
    let data = prepared(dir.path(), 6);
    let (codec, ctc) = models(dir.path(), &data);
    ok(&[
        "tokenizer",
        "train",
        "--manifest",
        s(&data.join("train.jsonl")),
        "--out",
        s(&data.join("tokenizer.json")),
        "--kind",
        "char",
        "--force",
    ]);
    let tokens = dir.path().join("tokens");
    ok(&[
        "codec",
        "extract",
        "--codec",
        s(&codec),
        "--data",
        s(&data),
        "--out",
        s(&tokens),
    ]);
    let exp = dir.path().join("exp");
    ok(&[
        "stats",
        "transitions",
        "--tokens",
        s(&tokens),
        "--out",
        s(&exp.join("transitions.safetensors")),
    ]);
    let ar = exp.join("ar");
    train_lm(
        &["mtp", "--preset", "tiny", "--heads", "4"],
        &data,
        &tokens,
        &ar,
    );
    train_lm(
        &["nar", "--preset", "tiny"],
        &data,
        &tokens,
        &exp.join("nar"),
    );
    let draft = exp.join("draft");
    train_lm(
        &["draft", "--target", s(&ar), "--layers", "0"],
        &data,
        &tokens,
        &draft,
    );

    // synthesize: a WAV at the codec's rate, and the speed line.
    let wav = dir.path().join("out.wav");
    let base = ["synthesize", "--exp", s(&exp), "--codec", s(&codec)];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .chain(extra)
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    let run_ok = |extra: &[&str]| {
        let args = with(extra);
        ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let run_fail = |extra: &[&str]| {
        let args = with(extra);
        fail(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let reference = std::fs::read_to_string(data.join("test.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(reference.lines().next().unwrap()).unwrap();
    let prompt_wav = first["path"].as_str().unwrap().to_string();
    for decoder in ["ar", "mtp", "mtp-viterbi", "self-spec"] {
        let out = run_ok(&[
            "--text",
            "the cat sat on the mat",
            "--decoder",
            decoder,
            "--heads",
            "2",
            "--top-k",
            "3",
            "-o",
            s(&wav),
        ]);
        assert!(
            out.contains("TPT") && out.contains("forward passes per token"),
            "{out}"
        );
        let audio = voxspec_audio::load(&wav).unwrap();
        assert_eq!(audio.sample_rate, 16000);
        assert!(!audio.samples.is_empty());
        std::fs::remove_file(&wav).unwrap();
    }
    // A long text: sentence by sentence into one WAV, joined by pauses.
    let out = run_ok(&[
        "--text",
        "The cat sat. The dog ran off.",
        "--decoder",
        "ar",
        "-o",
        s(&wav),
    ]);
    assert!(out.contains("2 pieces"), "{out}");
    let text_file = dir.path().join("chapter.txt");
    std::fs::write(&text_file, "The cat sat. The dog ran.\n\nA bird sang.\n").unwrap();
    let out = run_ok(&["--text-file", s(&text_file), "--join", "-o", s(&wav)]);
    assert!(out.contains("3 pieces"), "{out}");
    let audio = voxspec_audio::load(&wav).unwrap();
    // at least the two pauses (0.35 s after a sentence, 0.8 s after a paragraph)
    assert!(
        audio.samples.len() as f64 >= 1.15 * 16000.0,
        "{}",
        audio.samples.len()
    );
    std::fs::remove_file(&wav).unwrap();
    let err = run_fail(&["--text", "the cat", "--join", "-o", s(&wav)]);
    assert!(err.contains("--text-file"), "{err}");

    // The speculative decoders with the draft; greedy exact SD speaks AR's codes.
    let greedy_codes = |decoder: &str, extra: &[&str]| -> String {
        let mut args = vec!["--text", "the cat sat on the mat", "--decoder", decoder];
        args.extend(extra);
        args.extend(["--temperature", "0", "-o", s(&wav)]);
        let out = run_ok(&args);
        assert!(voxspec_audio::load(&wav).is_ok(), "{out}");
        out.lines()
            .next()
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or_default()
            .to_string()
    };
    let ar = greedy_codes("ar", &[]);
    for (decoder, extra) in [
        ("sd", vec!["--gamma", "2"]),
        ("ssd", vec!["--beta", "0.3"]),
        ("pcg", vec!["--theta", "0.2"]),
        ("pcg", vec![]),
    ] {
        let mut args = vec!["--draft", s(&draft)];
        args.extend(extra.iter().copied());
        let got = greedy_codes(decoder, &args);
        if decoder == "sd" {
            assert_eq!(got, ar, "greedy exact SD vs AR");
        }
    }
    let err = run_fail(&["--text", "hi", "--decoder", "sd", "-o", s(&wav)]);
    assert!(err.contains("--draft"), "{err}");
    let err = run_fail(&["--text", "hi", "--draft", s(&draft), "-o", s(&wav)]);
    assert!(err.contains("sd, ssd or pcg"), "{err}");

    // A text file: one WAV per line and a manifest.
    let lines = dir.path().join("lines.txt");
    std::fs::write(&lines, "the cat sat\n\n  a dog ran  \n").unwrap();
    let folder = dir.path().join("many");
    run_ok(&[
        "--text-file",
        s(&lines),
        "--decoder",
        "ar",
        "-o",
        s(&folder),
    ]);
    let manifest = std::fs::read_to_string(folder.join("manifest.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = manifest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{manifest}");
    assert_eq!(rows[1]["text"], "a dog ran");
    for (i, row) in rows.iter().enumerate() {
        let wav = folder.join(row["wav"].as_str().unwrap());
        assert_eq!(wav, folder.join(format!("{:04}.wav", i + 1)));
        assert!(voxspec_audio::load(&wav).is_ok());
    }
    std::fs::write(&lines, "\n  \n").unwrap();
    let err = run_fail(&["--text-file", s(&lines), "-o", s(&folder)]);
    assert!(err.contains("no sentence"), "{err}");

    // A voice prompt (with and without its transcript) conditions the NAR and the AR.
    run_ok(&[
        "--text",
        "a dog ran",
        "--prompt",
        &prompt_wav,
        "--prompt-text",
        first["text"].as_str().unwrap(),
        "-o",
        s(&wav),
    ]);
    assert!(wav.is_file());

    // Bad input: each a clear message and exit code 1.
    let err = run_fail(&["--text", "  ", "-o", s(&wav)]);
    assert!(err.contains("text is empty"), "{err}");
    let err = run_fail(&["--text", "日本語", "-o", s(&wav)]);
    assert!(err.contains("no character"), "{err}");
    let cargo_toml = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let err = run_fail(&["--text", "hi", "--prompt", s(&cargo_toml), "-o", s(&wav)]);
    assert!(
        err.contains("unsupported audio") && err.contains("Cargo.toml"),
        "{err}"
    );
    let err = run_fail(&["--text", "hi", "--model", s(&codec), "-o", s(&wav)]);
    assert!(err.contains("speechtokenizer"), "{err}");
    let err = run_fail(&[
        "--text",
        "hi",
        "--decoder",
        "mtp",
        "--heads",
        "8",
        "-o",
        s(&wav),
    ]);
    assert!(err.contains("4"), "{err}");

    // bench decode at temperature 0: every decoder, one run.
    let out = dir.path().join("bench");
    let bench = |extra: &[&str]| -> Vec<String> {
        [
            "bench",
            "decode",
            "--exp",
            s(&exp),
            "--codec",
            s(&codec),
            "--teacher",
            s(&ctc),
            "--data",
            s(&data),
            "--max-utterances",
            "2",
            "--out",
            s(&out),
        ]
        .iter()
        .chain(extra)
        .map(|a| a.to_string())
        .collect()
    };
    let args = bench(&[
        "--heads",
        "1,2,4",
        "--top-k",
        "3",
        "--draft",
        s(&draft),
        "--self-spec",
        "--gammas",
        "2",
        "--betas",
        "0,0.2",
        "--thetas",
        "0.5",
        "--temperature",
        "0",
    ]);
    let table = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(table.contains("| decoder | TPT (ms) | speedup"), "{table}");
    let report = read_json(&out.join("bench-decode.json"));
    assert!(out.join("bench-decode.md").is_file());
    let rows = report["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "ar",
            "mtp k=2",
            "mtp k=4",
            "mtp+viterbi k=2 top_k=3",
            "mtp+viterbi k=4 top_k=3",
            "sd γ=2",
            "ssd β=0.2 γ=2",
            "pcg θ=0.500 γ=2",
            "self-spec sd γ=2",
            "self-spec ssd β=0.2 γ=2",
            "self-spec pcg θ=0.500 γ=2",
        ]
    );
    // Forced choice among every transcript of the split (not only the 2 synthesised).
    let n_test = std::fs::read_to_string(data.join("test.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(report["forced_choice"]["candidates"], n_test);
    assert!((finite(&report["forced_choice"], "chance") - 1.0 / n_test as f64).abs() < 1e-12);
    assert!(table.contains("| ID (%) |"), "{table}");
    assert!(
        table.contains(&format!("among all {n_test} transcripts")),
        "{table}"
    );
    for r in rows {
        assert!(finite(r, "tpt_ms") > 0.0, "{r}");
        finite(r, "speedup");
        assert!(finite(r, "cer") >= 0.0);
        assert!((0.0..=1.0).contains(&finite(r, "forced_choice")), "{r}");
        finite(r, "nll");
        assert_eq!(r["utterances"], 2);
        // Model and decoder time are disjoint parts of the TPT.
        let parts = finite(r, "model_ms_per_token") + finite(r, "decoder_ms_per_token");
        assert!(parts > 0.0 && parts <= finite(r, "tpt_ms") * 1.0001, "{r}");
    }
    assert_eq!(rows[0]["speedup"], 1.0);
    assert_eq!(rows[0]["tokens_per_forward"], 1.0);
    assert!(finite(&rows[2], "tokens_per_forward") > 1.0, "{}", rows[2]);
    // Greedy exact speculation (draft model or MTP heads) emits AR's tokens.
    for i in [5, 8] {
        assert_eq!(rows[i]["tokens"], rows[0]["tokens"], "{}", rows[i]);
        let (a, b) = (finite(&rows[i], "nll"), finite(&rows[0], "nll"));
        assert!(
            (a - b).abs() < 1e-6,
            "{}: NLL {a} vs AR {b}",
            rows[i]["label"]
        );
        assert!(rows[i]["acceptance_rate"].as_f64().is_some());
    }
    let costs = report["forward_cost"].as_array().unwrap();
    assert_eq!(costs.len(), 4);
    assert_eq!(costs[0]["relative_to_k1"], 1.0);
    // The report says where it was measured.
    assert!(!report["cpu"].as_str().unwrap().is_empty());
    let kernel = report["kernel"].as_str().unwrap();
    assert!(
        ["amx", "avx512", "avx2", "portable"].contains(&kernel),
        "{kernel}"
    );

    // `--top-k` with no value: MTP rows without Viterbi. With AR on Burn as the baseline
    // engine, decoding the same sentences greedily: the native engine's tokens.
    let args = bench(&[
        "--heads",
        "1,2",
        "--top-k",
        "--temperature",
        "0",
        "--baseline-engine",
        "burn",
    ]);
    let table = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let report = read_json(&out.join("bench-decode.json"));
    let rows = report["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["ar", "mtp k=2"]);
    let baseline = &report["baseline"];
    assert_eq!(baseline["engine"], "burn");
    let row = &baseline["row"];
    assert_eq!(row["label"], "ar [burn]");
    assert_eq!(row["utterances"], 2);
    assert_eq!(row["tokens"], rows[0]["tokens"], "{row}");
    assert!(
        (finite(row, "nll") - finite(&rows[0], "nll")).abs() < 1e-9,
        "{row}"
    );
    let over = finite(baseline, "ar_speedup_over_baseline");
    assert!(
        (over - finite(row, "tpt_ms") / finite(&rows[0], "tpt_ms")).abs() < 1e-9 * over,
        "{baseline}"
    );
    assert!(
        (over * finite(row, "speedup") - 1.0).abs() < 1e-9,
        "{baseline}"
    );
    assert!(table.contains("| ar [burn] |"), "{table}");
    assert!(table.contains("the speed of `ar [burn]`"), "{table}");

    // Bad benchmark settings.
    for (extra, needle) in [
        (&["--gammas", "0", "--self-spec"][..], "γ = 0"),
        (&["--thetas", "1.5", "--self-spec"][..], "outside"),
        (&["--heads", "0"][..], "--heads"),
        (
            &["--baseline-engine", "native"][..],
            "--baseline-engine native",
        ),
    ] {
        let args = bench(extra);
        let err = fail(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(err.contains(needle), "{extra:?}: {err}");
    }

    // codec fill: the recordings' RVQ-1 with the NAR's layers 2..N, then a decoder-only run
    // that renders them.
    let fill = dir.path().join("fill");
    let out = ok(&[
        "codec",
        "fill",
        "--exp",
        s(&exp),
        "--codec",
        s(&codec),
        "--tokens",
        s(&tokens),
        "--data",
        s(&data),
        "--out",
        s(&fill),
    ]);
    assert!(out.contains("train: ") && out.contains("dev: "), "{out}");
    let (given, filled) = (
        voxspec_data::TokenStore::open(&tokens, "train").unwrap(),
        voxspec_data::TokenStore::open(&fill, "train").unwrap(),
    );
    assert_eq!(filled.meta(), given.meta());
    let mut ids = given.ids();
    ids.sort();
    let mut filled_ids = filled.ids();
    filled_ids.sort();
    assert_eq!(filled_ids, ids);
    for id in &ids {
        let (a, b) = (given.get(id).unwrap(), filled.get(id).unwrap());
        assert_eq!(a.n_frames, b.n_frames, "{id}");
        assert_eq!(a.stream(0), b.stream(0), "{id}: RVQ-1 is kept");
    }
    let err = fail(&[
        "codec",
        "fill",
        "--exp",
        s(&exp),
        "--codec",
        s(&codec),
        "--tokens",
        s(&tokens),
        "--data",
        s(&data),
        "--out",
        s(&fill),
    ]);
    assert!(err.contains("not empty"), "{err}");
    let tuned = dir.path().join("tuned");
    ok(&[
        "codec",
        "train",
        "--data",
        s(&data),
        "--out",
        s(&tuned),
        "--init",
        s(&codec),
        "--decoder-only",
        "--decoder-codes",
        s(&fill),
        "--steps",
        "1",
        "--batch",
        "2",
        "--segment",
        "0.4",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
    ]);
    assert!(tuned.join("model.safetensors").is_file());

    // codec train-mel on the filled codes; synthesis through it with the vocoder and with
    // Griffin-Lim, whole and streamed: with the NAR over the whole utterance the vocoder's
    // chunks (each rendered with the context it depends on) and Griffin-Lim's one piece are
    // the one-shot audio.
    let vocoder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/vocoder-minitts");
    let mel = dir.path().join("mel");
    let out = ok(&[
        "codec",
        "train-mel",
        "--data",
        s(&data),
        "--codes",
        s(&fill),
        "--vocoder",
        s(&vocoder),
        "--out",
        s(&mel),
        "--dim",
        "16",
        "--steps",
        "2",
        "--batch",
        "2",
        "--segment",
        "0.4",
        "--valid-every",
        "0",
        "--checkpoint-every",
        "0",
    ]);
    assert!(
        out.contains("mel decoder: 4 RVQ layers of 32 codes"),
        "{out}"
    );
    let config = read_json(&mel.join("config.json"));
    assert_eq!(config["kind"], "mel_decoder");
    assert_eq!(config["mel"]["hop_length"], 160);
    let (whole, streamed) = (
        dir.path().join("mel.wav"),
        dir.path().join("mel-stream.wav"),
    );
    for renderer in [&["--mel-vocoder", s(&vocoder)][..], &[][..]] {
        for (path, extra) in [
            (&whole, &[][..]),
            (&streamed, &["--stream", "--nar-window", "whole"][..]),
        ] {
            let mut args = vec![
                "--text",
                "the cat sat on the mat",
                "--decoder",
                "ar",
                "--mel-decoder",
                s(&mel),
                "-o",
                s(path),
            ];
            args.extend_from_slice(renderer);
            args.extend_from_slice(extra);
            run_ok(&args);
        }
        let (a, b) = (
            voxspec_audio::load(&whole).unwrap(),
            voxspec_audio::load(&streamed).unwrap(),
        );
        assert_eq!(a.sample_rate, 16000);
        assert!(!a.samples.is_empty() && a.samples.len() % 320 == 0);
        assert_eq!(a.samples.len(), b.samples.len(), "{renderer:?}");
        let diff = a
            .samples
            .iter()
            .zip(&b.samples)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff <= 1.0 / 32768.0 + 1e-6, "{renderer:?}: {diff}");
    }
    // export: a vocoder as its config and bf16 weights (half the bytes), which then renders.
    let exported = dir.path().join("vocoder-bf16");
    let out = ok(&[
        "export",
        "--checkpoint",
        s(&vocoder),
        "--to",
        s(&exported),
        "--dtype",
        "bf16",
    ]);
    assert!(out.contains("exported vocoder"), "{out}");
    assert_eq!(read_json(&exported.join("config.json"))["kind"], "vocoder");
    let bytes = |d: &Path| {
        std::fs::metadata(d.join("model.safetensors"))
            .unwrap()
            .len()
    };
    assert!(2 * bytes(&exported) < bytes(&vocoder) + 8192);
    run_ok(&[
        "--text",
        "the cat",
        "--decoder",
        "ar",
        "--mel-decoder",
        s(&mel),
        "--mel-vocoder",
        s(&exported),
        "-o",
        s(&whole),
    ]);
    // A mel decoder for another codebook is refused by name.
    let err = run_fail(&[
        "--text",
        "the cat",
        "--mel-decoder",
        s(&codec),
        "-o",
        s(&whole),
    ]);
    assert!(err.contains("mel decoder"), "{err}");

    // bench pipeline: short sentences and paragraphs in one run, every stage timed.
    let report_path = dir.path().join("pipeline.json");
    let pipeline = |extra: &[&str]| -> Vec<String> {
        [
            "bench",
            "pipeline",
            "--exp",
            s(&exp),
            "--codec",
            s(&codec),
            "--data",
            s(&data),
            "--sentences",
            "2",
            "--paragraphs",
            "1",
            "--paragraph-sentences",
            "2",
            "--out",
            s(&report_path),
        ]
        .iter()
        .chain(extra)
        .map(|a| a.to_string())
        .collect()
    };
    let args = pipeline(&[]);
    let out = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.contains("| sentences |") && out.contains("| paragraphs |"),
        "{out}"
    );
    let report = read_json(&report_path);
    let cases = report["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for (case, (label, texts)) in cases.iter().zip([("sentences", 2), ("paragraphs", 1)]) {
        assert_eq!(case["label"], label);
        assert_eq!(case["texts"], texts);
        assert!(case["audio_seconds"].as_f64().unwrap() > 0.0, "{case}");
        let shares: f64 = case["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((shares - 1.0).abs() < 1e-6, "{case}");
        let (p50, p95) = (
            finite(case, "first_audio_p50"),
            finite(case, "first_audio_p95"),
        );
        assert!(p50 > 0.0 && p95 >= p50, "{case}");
    }
    // A paragraph of two transcripts is spoken as (at least) two pieces.
    assert!(cases[1]["pieces"].as_u64().unwrap() >= 2, "{}", cases[1]);
    assert!(!report["cpu"].as_str().unwrap().is_empty());
    let args = pipeline(&["--decoder", "sd"]);
    let err = fail(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("ar, mtp or mtp-viterbi"), "{err}");
}

/// `bench serve` on the shipped real voice: the server's default engine (bf16), the CPU named,
/// one run per client count with the audio it served.
#[test]
fn bench_serve_names_the_host_and_serves_the_real_voice() {
    let dir = tempfile::tempdir().unwrap();
    let data = prepared(dir.path(), 3);
    let exp = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/kathleen");
    let out = dir.path().join("serve.json");
    ok(&[
        "--threads",
        "2",
        "bench",
        "serve",
        "--exp",
        s(&exp),
        "--data",
        s(&data),
        "--clients",
        "1,2",
        "--requests",
        "2",
        "--max-batch",
        "2",
        "--stream",
        "--out",
        s(&out),
    ]);
    let report = read_json(&out);
    assert_eq!(report["engine"], "native-bf16");
    assert!(!report["cpu"].as_str().unwrap().is_empty());
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert!(finite(&run["report"], "throughput") > 0.0);
        assert!(finite(&run["report"], "ttfb_p50") > 0.0);
        assert!(finite(&run["report"], "audio_seconds") > 0.0);
    }
}
