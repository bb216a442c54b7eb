//! The multi-stream LM: shapes, the loss counts only the delay pattern's valid positions, the
//! cached forward (step by step, in blocks, after truncation) equals the full forward, a tiny
//! model overfits two utterances through the shared loop, and greedy decoding reproduces them.

use std::collections::HashMap;

use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_multistream::{
    DecodeRequest, MsItem, MultiStreamConfig, MultiStreamData, MultiStreamError, MultiStreamModel,
    MultiStreamTask, MultiStreamTaskConfig, SeqRow, build_batch, greedy_decode, multistream_loss,
};
use voxspec_train::{BatchSource, LrSchedule, OptimConfig, TrainConfig, Trainer};

const TEXT_VOCAB: usize = 10;
const CODEBOOK: usize = 16;
const STREAMS: usize = 3;
const GLOBAL: usize = 4;

fn config() -> MultiStreamConfig {
    MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, STREAMS).with_global_dim(GLOBAL)
}

fn model(config: &MultiStreamConfig, seed: u64) -> MultiStreamModel {
    let device = Device::flex();
    device.seed(seed);
    config.init(&device).expect("valid config")
}

/// Deterministic pseudo-random codes `[streams][frames]`.
fn codes(frames: usize, salt: u32) -> Vec<Vec<u32>> {
    (0..STREAMS as u32)
        .map(|j| {
            (0..frames as u32)
                .map(|t| (t * 7 + j * 5 + salt * 3 + (t * t + salt) % 5) % CODEBOOK as u32)
                .collect()
        })
        .collect()
}

fn item(id: &str, text: Vec<u32>, streams: &[Vec<u32>], global: Option<Vec<f32>>) -> MsItem {
    let frames = streams[0].len();
    let data = streams.iter().flatten().copied().collect();
    MsItem {
        id: id.into(),
        text,
        codes: Codes::new(streams.len(), frames, data).expect("codes"),
        global,
        durations: None,
    }
}

fn two_items() -> Vec<MsItem> {
    vec![
        item(
            "a",
            vec![1, 2, 3, 4],
            &codes(8, 1),
            Some(vec![0.5, -1.0, 0.25, 1.0]),
        ),
        item(
            "b",
            vec![5, 6, 7, 8, 9, 2],
            &codes(10, 2),
            Some(vec![-0.5, 1.0, 0.75, -0.25]),
        ),
    ]
}

fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32")
}

fn ints<const D: usize>(t: Tensor<D, Int>) -> Vec<i64> {
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .expect("i64")
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn forward_shapes_and_bad_input() {
    let config = config();
    let model = model(&config, 1);
    let items = two_items();
    let batch =
        build_batch(&config, &items.iter().collect::<Vec<_>>(), &Device::flex()).expect("batch");
    // b: 1 voice + 6 text + (1 + 10 + 2) steps = 20 positions, the longest row.
    assert_eq!(batch.input.dims(), [2, 20]);
    assert_eq!(batch.input.lens, vec![1 + 4 + 11, 20]);
    let logits = model.forward(&batch.input).expect("forward");
    assert_eq!(logits.dims(), [2, 20, STREAMS, CODEBOOK + 1]);
    assert_eq!(batch.targets.dims(), [2, 20, STREAMS]);
    assert_eq!(model.streams(), STREAMS);

    let steps = vec![vec![CODEBOOK as u32 + 1]; STREAMS];
    let row = SeqRow {
        voice: None,
        text: &[1],
        steps: &steps,
        track: &[],
    };
    assert!(matches!(
        model.input(&config, &[row]),
        Err(MultiStreamError::TokenOutOfRange { what: "code", .. })
    ));
    let row = SeqRow {
        voice: Some(&[0.0; 3]),
        text: &[1],
        steps: &[],
        track: &[],
    };
    let err = model
        .input(&config, &[row])
        .expect_err("voice of 3")
        .to_string();
    assert!(err.contains("global_dim 4"), "{err}");
    let row = SeqRow {
        voice: None,
        text: &[TEXT_VOCAB as u32],
        steps: &[],
        track: &[],
    };
    assert!(model.input(&config, &[row]).is_err());
    let two = vec![vec![0u32]; 2];
    let row = SeqRow {
        voice: None,
        text: &[],
        steps: &two,
        track: &[],
    };
    assert!(model.input(&config, &[row]).is_err(), "2 streams of 3");
    assert!(model.input(&config, &[]).is_err());
    assert!(
        MultiStreamConfig::tiny(0, CODEBOOK, STREAMS)
            .init(&Device::flex())
            .is_err()
    );
}

#[test]
fn targets_sit_on_valid_positions_and_eos() {
    for delay in [0, 1, 2] {
        targets_for_delay(delay);
    }
}

fn targets_for_delay(delay: usize) {
    let config = config().with_delay(delay);
    let items = two_items();
    let pattern = config.pattern().expect("pattern");
    let batch = build_batch(&config, &[&items[0]], &Device::flex()).expect("batch");
    let targets = ints(batch.targets);
    let weights = floats(batch.weights);
    let [_, time] = batch.input.dims();
    let first = 1 + items[0].text.len();
    let frames = items[0].codes.n_frames;
    let mut scored = 0;
    for p in 0..time {
        for j in 0..STREAMS {
            let at = p * STREAMS + j;
            if weights[at] == 0.0 {
                continue;
            }
            scored += 1;
            let s = p - first; // panics (test failure) for a target on text or voice
            let want = match pattern.frame_at(j, s + 1, frames) {
                Some(f) => items[0].codes.stream(j)[f],
                None => {
                    assert_eq!(s + 1, pattern.step_of(j, frames), "EOS step of stream {j}");
                    CODEBOOK as u32
                }
            };
            assert_eq!(
                targets[at],
                i64::from(want),
                "delay {delay} position {p} stream {j}"
            );
        }
    }
    // Every frame of every stream plus one EOS per stream; none of the S positions.
    assert_eq!(scored, STREAMS * (frames + 1));
}

#[test]
fn loss_counts_only_valid_positions() {
    let config = config();
    let model = model(&config, 2);
    let items = two_items();
    let device = Device::flex();
    let batch = build_batch(&config, &items.iter().collect::<Vec<_>>(), &device).expect("batch");
    let [b, t] = batch.input.dims();
    let logits = model.forward(&batch.input).expect("forward");
    let loss = |targets: &[i64], logits: Tensor<4>| -> f32 {
        let targets = Tensor::<3, Int>::from_data(
            TensorData::new(targets.to_vec(), [b, t, STREAMS]),
            &device,
        );
        let (total, per) = multistream_loss(logits, targets, batch.weights.clone());
        assert_eq!(per.len(), STREAMS);
        floats(total)[0]
    };
    let targets = ints(batch.targets.clone());
    let weights = floats(batch.weights.clone());
    let base = loss(&targets, logits.clone());
    assert!(base.is_finite() && base > 0.0);

    // A target at a masked position (text, S or padding): the loss is bit-identical.
    let masked = weights
        .iter()
        .position(|&w| w == 0.0)
        .expect("a masked slot");
    let mut changed = targets.clone();
    changed[masked] = (changed[masked] + 5) % CODEBOOK as i64;
    assert_eq!(loss(&changed, logits.clone()), base);
    let mut all_masked = targets.clone();
    for (slot, &w) in all_masked.iter_mut().zip(&weights) {
        if w == 0.0 {
            *slot = 3;
        }
    }
    assert_eq!(loss(&all_masked, logits.clone()), base);

    // A target at a valid position: the loss moves (negative control).
    let valid = weights
        .iter()
        .position(|&w| w == 1.0)
        .expect("a scored slot");
    let mut changed = targets.clone();
    changed[valid] = (changed[valid] + 5) % CODEBOOK as i64;
    assert_ne!(loss(&changed, logits.clone()), base);

    // An input id at a padded position of row 0 (shorter) does not reach the loss.
    let mut padded = batch.input.clone();
    let mut speech = ints(padded.speech.clone());
    let pad_pos = batch.input.lens[0]; // first padded position of row 0
    speech[pad_pos] = 2; // [batch 0, stream 0, time pad_pos]
    padded.speech = Tensor::from_data(TensorData::new(speech, [b, STREAMS, t]), &device);
    let logits_padded = model.forward(&padded).expect("forward");
    let diff = max_abs_diff(&floats(loss_tensor(&batch, logits_padded)), &[base]);
    assert!(diff < 1e-6, "padding changed the loss by {diff}");

    // An input id at a valid speech position does (negative control).
    let mut moved = batch.input.clone();
    let mut speech = ints(moved.speech.clone());
    let valid_in = 1 + items[0].text.len() + 2; // row 0, step 2, stream 0
    speech[valid_in] = (speech[valid_in] + 1) % CODEBOOK as i64;
    moved.speech = Tensor::from_data(TensorData::new(speech, [b, STREAMS, t]), &device);
    let logits_moved = model.forward(&moved).expect("forward");
    assert!(floats(loss_tensor(&batch, logits_moved))[0] != base);
}

fn loss_tensor(batch: &voxspec_multistream::MsBatch, logits: Tensor<4>) -> Tensor<1> {
    multistream_loss(logits, batch.targets.clone(), batch.weights.clone()).0
}

/// `[positions][streams · vocab]` of row 0.
fn rows_of(logits: Tensor<4>, from: usize, len: usize) -> Vec<f32> {
    floats(logits.narrow(0, 0, 1).narrow(1, from, len))
}

#[test]
fn cached_forward_equals_full_forward() {
    let config = config();
    let model = model(&config, 3);
    let pattern = config.pattern().expect("pattern");
    let text = [3u32, 1, 4, 1, 5];
    let voice = [0.3f32, -0.7, 1.1, 0.0];
    let delayed = pattern.build(&codes(9, 4)).expect("delayed");
    let n = delayed[0].len(); // 12 steps
    let cols = |from: usize, to: usize| -> Vec<Vec<u32>> {
        delayed.iter().map(|r| r[from..to].to_vec()).collect()
    };
    let speech_row = |from: usize, to: usize| cols(from, to);
    let full_input = model
        .input(
            &config,
            &[SeqRow {
                voice: Some(&voice),
                text: &text,
                steps: &delayed,
                track: &[],
            }],
        )
        .expect("input");
    let first = 1 + text.len();
    let full = rows_of(model.forward(&full_input).expect("full"), 0, first + n);

    let mut cache = model.new_cache(1, first + n).expect("cache");
    let prefill_steps = cols(0, 1);
    let prefill = model
        .input(
            &config,
            &[SeqRow {
                voice: Some(&voice),
                text: &text,
                steps: &prefill_steps,
                track: &[],
            }],
        )
        .expect("prefill");
    let mut got = rows_of(
        model.forward_cached(&prefill, &mut cache).expect("prefill"),
        0,
        first + 1,
    );
    // One step at a time, then a block of 3 (speculative verification), then singles.
    let mut s = 1;
    for width in [1, 1, 1, 3, 1, 1, 1, 1, 1] {
        let block = speech_row(s, s + width);
        let input = model
            .input(
                &config,
                &[SeqRow {
                    voice: None,
                    text: &[],
                    steps: &block,
                    track: &[],
                }],
            )
            .expect("block");
        got.extend(rows_of(
            model.forward_cached(&input, &mut cache).expect("cached"),
            0,
            width,
        ));
        s += width;
    }
    assert_eq!(s, n);
    let diff = max_abs_diff(&got, &full);
    println!("cached vs full forward: max |Δ| = {diff:e}");
    assert!(diff < 1e-4, "cached forward differs by {diff}");

    // Roll back to steps 0..=3 and re-run steps 4.. as one block.
    let keep = first + 4;
    cache.truncate(keep);
    let rest = speech_row(4, n);
    let input = model
        .input(
            &config,
            &[SeqRow {
                voice: None,
                text: &[],
                steps: &rest,
                track: &[],
            }],
        )
        .expect("rest");
    let again = rows_of(
        model
            .forward_cached(&input, &mut cache)
            .expect("re-forward"),
        0,
        n - 4,
    );
    let width = STREAMS * (CODEBOOK + 1);
    let diff = max_abs_diff(&again, &full[keep * width..]);
    println!("truncate + re-forward vs full: max |Δ| = {diff:e}");
    assert!(
        diff < 1e-4,
        "after truncation the forward differs by {diff}"
    );

    // Negative control: a changed step after the rollback changes the outputs.
    cache.truncate(keep);
    let mut wrong = speech_row(4, n);
    wrong[0][0] = (wrong[0][0] + 1) % CODEBOOK as u32;
    let input = model
        .input(
            &config,
            &[SeqRow {
                voice: None,
                text: &[],
                steps: &wrong,
                track: &[],
            }],
        )
        .expect("wrong");
    let other = rows_of(
        model
            .forward_cached(&input, &mut cache)
            .expect("re-forward"),
        0,
        n - 4,
    );
    assert!(max_abs_diff(&other, &full[keep * width..]) > 1e-3);
}

#[test]
fn data_plan_is_deterministic_and_items_are_checked() {
    let config = config();
    let bucket = BucketConfig {
        max_items: 1,
        max_padded_len: 1024,
        shuffle: true,
        seed: 9,
    };
    let data = MultiStreamData::new(two_items(), &config, bucket.clone()).expect("data");
    assert_eq!(data.len(), 2);
    assert_eq!(data.plan(3).expect("plan"), data.plan(3).expect("plan"));
    assert_eq!(data.batches_in_epoch(0), 2);
    let seen: Vec<usize> = (0..8).map(|e| data.plan(e).expect("plan")[0][0]).collect();
    assert!(
        seen.contains(&0) && seen.contains(&1),
        "epochs shuffle: {seen:?}"
    );

    // From (text, codes) pairs joined with a map of global vectors.
    let tts: Vec<TtsItem> = two_items()
        .into_iter()
        .map(|i| TtsItem {
            id: i.id,
            speaker: "s".into(),
            text: i.text,
            codes: i.codes,
            durations: None,
        })
        .collect();
    let globals: HashMap<String, Vec<f32>> = [("a".to_string(), vec![1.0; GLOBAL])].into();
    let items = MsItem::from_tts(&tts, Some(&globals));
    assert_eq!(items[0].global.as_deref(), Some(&[1.0; GLOBAL][..]));
    let err = MultiStreamData::new(items, &config, bucket.clone()).expect_err("b has none");
    assert!(
        err.to_string().contains("utterance b has no global vector"),
        "{err}"
    );

    let few = vec![item(
        "c",
        vec![1],
        &codes(4, 0)[..2],
        Some(vec![0.0; GLOBAL]),
    )];
    let err = MultiStreamData::new(few, &config, bucket.clone()).expect_err("2 streams");
    assert!(err.to_string().contains("2 code streams"), "{err}");
    let mut big = codes(4, 0);
    big[1][2] = CODEBOOK as u32;
    let big = vec![item("d", vec![1], &big, Some(vec![0.0; GLOBAL]))];
    assert!(MultiStreamData::new(big, &config, bucket.clone()).is_err());
    // More streams than the model reads: the first STREAMS are used.
    let mut more = codes(4, 0);
    more.push(vec![1; 4]);
    let more = vec![item("e", vec![1], &more, Some(vec![0.0; GLOBAL]))];
    assert!(MultiStreamData::new(more, &config, bucket).is_ok());
}

#[test]
fn tiny_model_overfits_and_greedy_decoding_reproduces_it() {
    // d = 1 (the paper's default), d = 0 (the no-delay ablation: EOS past the last step) and
    // d = 2 (streams 4 steps apart).
    for delay in [1, 0, 2] {
        overfit_and_decode(delay);
    }
}

fn overfit_and_decode(delay: usize) {
    let mut config = config().with_delay(delay);
    config.transformer = voxspec_nn::TransformerConfig::tiny()
        .with_d_model(48)
        .with_n_heads(4)
        .with_d_ff(96)
        .with_dropout(0.0);
    let items = two_items();
    let bucket = BucketConfig {
        max_items: 8,
        max_padded_len: 1024,
        shuffle: true,
        seed: 1,
    };
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig {
            bucket: bucket.clone(),
        },
        train: MultiStreamData::new(items.clone(), &config, bucket).expect("data"),
        valid: None,
        init: None,
    };
    let steps = 120;
    let train = TrainConfig {
        seed: 5,
        max_steps: steps,
        optimizer: OptimConfig {
            lr: 1e-2,
            warmup_steps: 10,
            schedule: LrSchedule::Cosine {
                decay_steps: steps,
                min_lr: 1e-3,
            },
            ..OptimConfig::default()
        },
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let device = Device::flex();
    device.seed(7);
    let outcome = Trainer::new(train, task, dir.path(), &device)
        .run(&mut ())
        .expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    assert_eq!(
        records.iter().filter(|r| r.split == "train").count(),
        steps,
        "one record per step"
    );
    let start = records.first().expect("a record").values["loss"];
    let end = records.last().expect("a record").values["loss"];
    println!("overfit (delay {delay}): loss {start:.3} at step 1 → {end:.4} at step {steps}");
    assert!(
        start > 2.0,
        "a fresh model starts near ln 17 = 2.83, got {start}"
    );
    assert!(end < 0.05, "loss {end} after {steps} steps");

    let model = outcome.model.valid();
    for it in &items {
        let want: Vec<Vec<u32>> = (0..STREAMS).map(|j| it.codes.stream(j).to_vec()).collect();
        let got = greedy_decode(
            &model,
            &config,
            &DecodeRequest {
                text: &it.text,
                voice: it.global.as_deref(),
                prompt: &[],
                max_frames: 30,
                durations: None,
            },
        )
        .expect("decode");
        assert_eq!(got, want, "delay {delay}, utterance {}", it.id);
        // The prompt is kept and continued.
        let prompt: Vec<Vec<u32>> = want.iter().map(|s| s[..3].to_vec()).collect();
        let got = greedy_decode(
            &model,
            &config,
            &DecodeRequest {
                text: &it.text,
                voice: it.global.as_deref(),
                prompt: &prompt,
                max_frames: 30,
                durations: None,
            },
        )
        .expect("decode with prompt");
        assert_eq!(
            got, want,
            "delay {delay}, utterance {} from a 3-frame prompt",
            it.id
        );
    }
    // Stopping at max_frames without EOS: exactly that many frames.
    let cut = greedy_decode(
        &model,
        &config,
        &DecodeRequest {
            text: &items[1].text,
            voice: items[1].global.as_deref(),
            prompt: &[],
            max_frames: 5,
            durations: None,
        },
    )
    .expect("decode");
    assert_eq!(cut.len(), STREAMS);
    assert!(cut.iter().all(|s| s.len() == 5));
    assert_eq!(cut[0][..], items[1].codes.stream(0)[..5]);
    let bad = greedy_decode(
        &model,
        &config,
        &DecodeRequest {
            text: &[],
            voice: None,
            prompt: &[],
            max_frames: 5,
            durations: None,
        },
    );
    assert!(bad.is_err());
}
