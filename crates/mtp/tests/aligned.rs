//! Aligned AR models (phone track + duration predictor): cached decoding with rollback equals
//! the full forward over the same track, prompts are checked, and training on data whose codes
//! follow the phones teaches the model to use its text — the shuffled-text diagnostic shows a
//! large gap — and teaches the duration predictor the durations.

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_infer::{LanguageModel, LogitsRequest};
use voxspec_mtp::{
    AlignConfig, FrameTrack, MtpConfig, MtpData, MtpModel, MtpTask, MtpTaskConfig, TtsPrompt,
};
use voxspec_train::{LrSchedule, OptimConfig, TrainConfig, Trainer};

const TEXT_VOCAB: usize = 12;
const CODEBOOK: usize = 10;

fn config() -> MtpConfig {
    MtpConfig::tiny(TEXT_VOCAB, CODEBOOK)
        .with_alignment(Some(AlignConfig::new().with_lookahead(4).with_progress(4)))
}

fn model() -> MtpModel {
    let device = Device::flex();
    device.seed(7);
    config().init(&device).expect("valid config")
}

/// Logits `[time][head][vocab]` of the full forward of `ids` with the track of `text` lasting
/// `durations`.
fn full_logits(
    model: &MtpModel,
    text: &[u32],
    durations: &[u32],
    ids: &[u32],
) -> Vec<Vec<Vec<f32>>> {
    let layout = model.track.as_ref().expect("aligned").layout();
    let track = FrameTrack::new(text, durations);
    let mut t = Vec::new();
    FrameTrack::push_none(text.len(), &layout, &mut t);
    for f in 0..ids.len() - text.len() {
        track.push_ids(f, &layout, &mut t);
    }
    let device = Device::flex();
    let idv: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
    let ids_t = Tensor::<2, Int>::from_data(TensorData::new(idv, [1, ids.len()]), &device);
    let tv: Vec<i64> = t.into_iter().map(i64::from).collect();
    let track_t =
        Tensor::<3, Int>::from_data(TensorData::new(tv, [1, ids.len(), layout.slots()]), &device);
    let heads = model.forward(ids_t, Some(track_t)).expect("forward");
    let vocab = CODEBOOK + 1;
    let per_head: Vec<Vec<f32>> = heads
        .into_iter()
        .map(|h| h.into_data().try_into_vec::<f32>().expect("f32"))
        .collect();
    (0..ids.len())
        .map(|p| {
            per_head
                .iter()
                .map(|h| h[p * vocab..(p + 1) * vocab].to_vec())
                .collect()
        })
        .collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    let max = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(max < 1e-4, "{what}: max abs diff {max}");
}

#[test]
// `h` indexes the cached logits (`row(b, p, h)`) and the full ones alike.
#[allow(clippy::needless_range_loop)]
fn cached_decoding_with_rollback_equals_the_full_forward() {
    let model = model();
    let heads = model.n_heads();
    let all = LogitsRequest {
        heads,
        last_only: false,
    };
    let prompts = [
        TtsPrompt {
            text: vec![3, 4, 5],
            codes: vec![],
            durations: Some(vec![2, 1, 3]),
        },
        TtsPrompt {
            text: vec![7, 8],
            codes: vec![],
            durations: Some(vec![1, 4]),
        },
    ];
    let mut cache = model.new_cache(2, 32).expect("cache");
    let first = model
        .prefill(&mut cache, &prompts, LogitsRequest::heads_at_last(heads))
        .expect("prefill");
    // ragged block, then a rollback of two codes of sequence 0 and a different continuation
    model
        .extend(&mut cache, &[vec![1, 2, 3], vec![4]], all)
        .expect("extend");
    let len0 = model.cache_len(&cache, 0);
    model.truncate(&mut cache, 0, len0 - 2).expect("truncate");
    let last = model
        .extend(&mut cache, &[vec![9, 0, 6, 6], vec![5, 5]], all)
        .expect("extend");
    let kept = [vec![1, 9, 0, 6, 6], vec![4, 5, 5]];
    for (b, prompt) in prompts.iter().enumerate() {
        let ids = model.prefix_ids(&prompt.text, &kept[b]).expect("ids");
        let durations = prompt.durations.as_ref().expect("durations");
        let full = full_logits(&model, &prompt.text, durations, &ids);
        assert_eq!(model.cache_len(&cache, b), ids.len());
        let new = [4usize, 2][b];
        for h in 0..heads {
            assert_close(first.row(b, 0, h), &full[prompt.text.len()][h], "prefill");
            for p in 0..new {
                let at = ids.len() - new + p;
                assert_close(last.row(b, p, h), &full[at][h], "after rollback");
            }
        }
    }
    // the track reaches the model: other durations give other logits
    let mut other = model.new_cache(1, 32).expect("cache");
    let moved = model
        .prefill(
            &mut other,
            &[TtsPrompt {
                durations: Some(vec![1, 1, 1]),
                ..prompts[0].clone()
            }],
            LogitsRequest::heads_at_last(heads),
        )
        .expect("prefill");
    let diff = moved
        .row(0, 0, 1)
        .iter()
        .zip(first.row(0, 0, 1))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(diff > 1e-3, "head 1 ignored the durations (diff {diff})");
}

#[test]
fn prompts_are_checked() {
    let model = model();
    let mut cache = model.new_cache(1, 32).expect("cache");
    let bad = |p: TtsPrompt, cache: &mut _| {
        model
            .prefill(cache, &[p], LogitsRequest::next_token())
            .unwrap_err()
            .to_string()
    };
    let err = bad(
        TtsPrompt {
            text: vec![1, 2],
            codes: vec![3],
            durations: Some(vec![1, 1]),
        },
        &mut cache,
    );
    assert!(err.contains("acoustic prompt"), "{err}");
    let err = bad(
        TtsPrompt {
            text: vec![1, 2],
            codes: vec![],
            durations: Some(vec![1]),
        },
        &mut cache,
    );
    assert!(err.contains("1 durations for 2 text tokens"), "{err}");
    // without durations the duration predictor supplies them
    let ok = model.prefill(
        &mut cache,
        &[TtsPrompt::new(vec![1, 2], vec![])],
        LogitsRequest::next_token(),
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
    assert!(cache.track(0).expect("track").frames() >= 2);
    // a plain model refuses durations
    let plain = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK)
        .init(&Device::flex())
        .expect("plain");
    let mut cache = plain.new_cache(1, 32).expect("cache");
    let err = plain
        .prefill(
            &mut cache,
            &[TtsPrompt {
                text: vec![1],
                codes: vec![],
                durations: Some(vec![2]),
            }],
            LogitsRequest::next_token(),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("not aligned"), "{err}");
}

/// Utterances whose code at each frame is a function of the phone spoken there (and how far
/// into it), with each phone lasting `1 + phone % 3` frames: the codes are predictable only
/// from the text, so a model that uses it has a low loss with its own text and a high one with
/// another utterance's.
fn phone_items(n: u32, seed: u32) -> Vec<TtsItem> {
    (0..n)
        .map(|i| {
            let len = 4 + (i % 4) as usize;
            let text: Vec<u32> = (0..len as u32)
                .map(|k| 4 + ((i * 7 + k * 5 + seed).wrapping_mul(2654435761) >> 7) % 8)
                .collect();
            let durations: Vec<u32> = text.iter().map(|&p| 1 + p % 3).collect();
            let mut codes = Vec::new();
            for (&p, &d) in text.iter().zip(&durations) {
                for f in 0..d {
                    codes.push((p + 3 * f) % CODEBOOK as u32);
                }
            }
            let frames = codes.len();
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text,
                codes: Codes::new(1, frames, codes).expect("codes"),
                durations: Some(durations),
            }
        })
        .collect()
}

#[test]
fn training_follows_the_text_and_learns_durations() {
    let config = config();
    let bucket = BucketConfig {
        max_items: 8,
        max_padded_len: 1024,
        shuffle: true,
        seed: 1,
    };
    let train_items = phone_items(48, 0);
    let valid_items = phone_items(16, 99);
    let task = MtpTask {
        model: config.clone(),
        task: MtpTaskConfig {
            head_weights: vec![1.0; config.n_heads],
            bucket: bucket.clone(),
            code_noise: 0.0,
        },
        train: MtpData::new(&train_items, &config, bucket.clone()),
        valid: Some(
            MtpData::new(
                &valid_items,
                &config,
                BucketConfig {
                    shuffle: false,
                    ..bucket
                },
            )
            .with_shuffled_text(),
        ),
    };
    let train = TrainConfig {
        seed: 5,
        max_steps: 150,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 10,
            schedule: LrSchedule::Cosine {
                decay_steps: 150,
                min_lr: 3e-4,
            },
            ..OptimConfig::default()
        },
        log_every: 10,
        valid_every: 150,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let device = Device::flex();
    device.seed(11);
    let trainer = Trainer::new(train, task, dir.path(), &device);
    trainer.run(&mut ()).expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    let valid = records
        .iter()
        .rev()
        .find(|r| r.split == "valid")
        .expect("a validation record");
    let own = valid.values["head0"];
    let shuffled = valid.values["head0_shuffled_text"];
    let duration = valid.values["duration"];
    assert!(own < 0.5, "head 0 cross-entropy {own} with the true text");
    assert!(
        shuffled > own + 1.0,
        "shuffled text {shuffled} vs own {own}: the model does not use its text"
    );
    assert!(duration < 0.05, "duration loss {duration}");
}
