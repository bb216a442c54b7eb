//! The NAR model: padding does not change an item's logits, training learns layers that follow
//! from the ones below, generation fills every layer, and an aligned NAR reads its phone track.

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_mtp::{
    FrameTrack, NarConfig, NarData, NarItem, NarModel, NarTask, NarTaskConfig, NarTrackConfig,
};
use voxspec_train::{OptimConfig, TrainConfig, Trainer};

const CB: usize = 6;
const NQ: usize = 3;

/// Layer `q` of frame `f` is `(layer0 + q) mod CB`: predictable from the layers below.
fn layers(first: &[u32]) -> Vec<Vec<u32>> {
    (0..NQ as u32)
        .map(|q| first.iter().map(|&c| (c + q) % CB as u32).collect())
        .collect()
}

fn values(t: Tensor<3>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32")
}

fn model() -> NarModel {
    let device = Device::flex();
    device.seed(4);
    NarConfig::tiny(8, CB, NQ).init(&device).expect("model")
}

#[test]
fn padding_does_not_change_an_items_logits() {
    let model = model();
    let a = layers(&[1, 2, 3, 4]);
    let b = layers(&[0, 5, 5, 1, 2, 3, 4, 0]);
    let alone = model
        .inputs(&[NarItem::new(&[1, 2], &a, 1)])
        .expect("input");
    let batch = model
        .inputs(&[
            NarItem::new(&[1, 2], &a, 1),
            NarItem::new(&[3, 4, 5, 6], &b, 3),
        ])
        .expect("input");
    for stage in 1..NQ {
        let x = values(model.forward(&alone, stage).expect("forward"));
        let y = values(
            model
                .forward(&batch, stage)
                .expect("forward")
                .narrow(0, 0, 1)
                .narrow(1, 0, 4),
        );
        let diff = x
            .iter()
            .zip(&y)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-4, "stage {stage}: {diff}");
    }
}

#[test]
fn bad_input_is_refused() {
    let model = model();
    let a = layers(&[1, 2]);
    let input = model.inputs(&[NarItem::new(&[1], &a, 0)]).expect("input");
    assert!(model.forward(&input, 0).is_err());
    assert!(model.forward(&input, NQ).is_err());
    assert!(model.inputs(&[NarItem::new(&[], &a, 0)]).is_err());
    assert!(model.inputs(&[NarItem::new(&[1], &a[..2], 0)]).is_err());
    assert!(model.inputs(&[NarItem::new(&[1], &a, 3)]).is_err());
    let bad = vec![vec![0, 1], vec![0, CB as u32], vec![0, 1]];
    let err = model
        .inputs(&[NarItem::new(&[1], &bad, 0)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("code token 6"), "{err}");
    assert!(model.generate(&[1], &a[..1], &[1, 2], None).is_err());
    // A track for a model without one, or of the wrong length for an aligned one.
    let err = model
        .generate(
            &[1],
            &[vec![], vec![], vec![]],
            &[1, 2],
            Some(&[0, 0, 0, 0]),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("not aligned"), "{err}");
    let aligned = NarConfig::tiny(8, CB, NQ)
        .with_track(Some(NarTrackConfig::new()))
        .init(&Device::flex())
        .expect("model");
    let item = NarItem {
        track: Some(&[0, 0, 0]),
        ..NarItem::new(&[1], &a, 0)
    };
    let err = aligned.inputs(&[item]).unwrap_err().to_string();
    assert!(err.contains("3 track ids for 2 frames"), "{err}");
}

/// A NAR of `config` trained 150 steps on `items` (phone tracks when `config` has one), with
/// prompts of `prompt_fraction` of each utterance.
fn train_nar(config: &NarConfig, items: &[TtsItem], prompt_fraction: (f32, f32)) -> NarModel {
    let task_config = NarTaskConfig {
        bucket: BucketConfig {
            max_items: 8,
            max_padded_len: 1024,
            shuffle: true,
            seed: 3,
        },
        prompt_fraction,
    };
    let task = NarTask {
        model: config.clone(),
        task: task_config.clone(),
        train: NarData::new(items, NQ, config.track_layout(), task_config).expect("data"),
        valid: None,
    };
    let train = TrainConfig {
        seed: 2,
        max_steps: 150,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 10,
            ..OptimConfig::default()
        },
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    Trainer::new(train, task, dir.path(), &Device::flex())
        .run(&mut ())
        .expect("training")
        .model
        .valid()
}

#[test]
fn training_learns_the_upper_layers() {
    let config = NarConfig::tiny(8, CB, NQ);
    let items: Vec<TtsItem> = (0..24u32)
        .map(|i| {
            let n = 6 + (i as usize % 4);
            let first: Vec<u32> = (0..n as u32).map(|j| (i * 7 + j * j) % CB as u32).collect();
            let flat: Vec<u32> = layers(&first).concat();
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text: vec![1 + i % 6],
                codes: Codes::new(NQ, n, flat).expect("codes"),
                durations: None,
            }
        })
        .collect();
    let model = train_nar(&config, &items, (0.2, 0.5));
    // An unseen utterance: prompt of 3 frames, 5 target frames.
    let prompt = layers(&[2, 0, 4]);
    let first = [5u32, 1, 1, 3, 0];
    let out = model
        .generate(&[2], &prompt, &first, None)
        .expect("generate");
    assert_eq!(out.len(), NQ);
    let want = layers(&first);
    let correct: usize = (1..NQ)
        .map(|q| out[q].iter().zip(&want[q]).filter(|(a, b)| a == b).count())
        .sum();
    assert!(
        correct >= 9,
        "{correct}/10 upper-layer codes right: {out:?}"
    );
}

/// Utterances whose upper layers are set by the phone each frame speaks (`(phone + q) mod CB`)
/// while layer 0 is noise: only a model told where each phone lies can fill them.
fn phone_items(count: u32) -> Vec<TtsItem> {
    (0..count)
        .map(|i| {
            let phones: Vec<u32> = (0..4).map(|k| 1 + (i * 5 + k * 3) % 7).collect();
            let durations: Vec<u32> = (0..4).map(|k| 1 + (i + k) % 3).collect();
            let mut per_frame = Vec::new();
            for (&p, &d) in phones.iter().zip(&durations) {
                per_frame.extend(std::iter::repeat_n(p, d as usize));
            }
            let n = per_frame.len();
            let first: Vec<u32> = (0..n as u32)
                .map(|j| (i * 11 + j * 7) % CB as u32)
                .collect();
            let mut flat = first;
            for q in 1..NQ as u32 {
                flat.extend(per_frame.iter().map(|&p| (p + q) % CB as u32));
            }
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text: phones,
                codes: Codes::new(NQ, n, flat).expect("codes"),
                durations: Some(durations),
            }
        })
        .collect()
}

/// Upper-layer codes right out of all, over unseen utterances, for a NAR trained on
/// [`phone_items`] with or without the phone track.
fn phone_accuracy(aligned: bool) -> f32 {
    let config = NarConfig::tiny(8, CB, NQ).with_track(aligned.then(NarTrackConfig::new));
    let items = phone_items(40);
    let model = train_nar(&config, &items[..32], (0.0, 0.0));
    let (mut right, mut all) = (0, 0);
    for item in &items[32..] {
        let n = item.codes.n_frames;
        let first = item.codes.stream(0);
        let track = model.track_layout().map(|layout| {
            FrameTrack::new(&item.text, item.durations.as_deref().expect("durations"))
                .ids(&layout, 0, n)
        });
        let empty = vec![Vec::new(); NQ];
        let out = model
            .generate(&item.text, &empty, first, track.as_deref())
            .expect("generate");
        for (q, layer) in out.iter().enumerate().skip(1) {
            right += layer
                .iter()
                .zip(item.codes.stream(q))
                .filter(|(a, b)| a == b)
                .count();
            all += n;
        }
    }
    right as f32 / all as f32
}

#[test]
fn an_aligned_nar_reads_the_phone_track() {
    let aligned = phone_accuracy(true);
    let plain = phone_accuracy(false);
    assert!(aligned >= 0.9, "aligned: {aligned}");
    assert!(plain < aligned - 0.2, "plain {plain} vs aligned {aligned}");
}

#[test]
fn an_aligned_nar_needs_durations() {
    let mut items = phone_items(2);
    items[1].durations = None;
    let layout = NarConfig::tiny(8, CB, NQ)
        .with_track(Some(NarTrackConfig::new()))
        .track_layout();
    let task = NarTaskConfig {
        bucket: BucketConfig {
            max_items: 8,
            max_padded_len: 1024,
            shuffle: false,
            seed: 0,
        },
        prompt_fraction: (0.0, 0.0),
    };
    let err = NarData::new(&items, NQ, layout, task.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("u1 has no durations"), "{err}");
    assert!(NarData::new(&items, NQ, None, task).is_ok());
}
