//! Fixtures shared by the aligned-model tests: a tiny aligned config, two utterances with
//! phone durations, and the short overfitting run they train with.

#![allow(dead_code)]

use burn::tensor::Device;
use voxspec_data::{BucketConfig, Codes};
use voxspec_multistream::{
    MsAlignConfig, MsItem, MultiStreamConfig, MultiStreamData, MultiStreamModel, MultiStreamTask,
    MultiStreamTaskConfig,
};
use voxspec_train::{LrSchedule, MetricsRecord, OptimConfig, TrainConfig, Trainer};

pub const TEXT_VOCAB: usize = 12;
pub const CODEBOOK: usize = 16;
pub const STREAMS: usize = 2;
pub const UNITS: usize = 2;

/// A tiny aligned model: width 48, 2 units per frame, 2 phones per frame, no dropout.
pub fn aligned_config() -> MultiStreamConfig {
    let mut c = MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, STREAMS).with_align(Some(
        MsAlignConfig::new()
            .with_units_per_frame(UNITS)
            .with_phones_per_frame(2)
            .with_frames_ahead(2)
            .with_duration_layers(1),
    ));
    c.transformer = voxspec_nn::TransformerConfig::tiny()
        .with_d_model(48)
        .with_n_heads(4)
        .with_d_ff(96)
        .with_dropout(0.0);
    c
}

/// An utterance of `text` with `durations` (units) and deterministic codes salted by `salt`.
pub fn item(id: &str, text: Vec<u32>, durations: Vec<u32>, salt: u32) -> MsItem {
    let units: u32 = durations.iter().sum();
    let frames = (units as usize).div_ceil(UNITS);
    let streams: Vec<Vec<u32>> = (0..STREAMS as u32)
        .map(|j| {
            (0..frames as u32)
                .map(|t| (t * 5 + j * 3 + salt * 7 + (t * t) % 3) % CODEBOOK as u32)
                .collect()
        })
        .collect();
    MsItem {
        id: id.into(),
        text,
        codes: Codes::new(STREAMS, frames, streams.concat()).expect("codes"),
        global: None,
        durations: Some(durations),
    }
}

/// The two training utterances.
pub fn items() -> Vec<MsItem> {
    vec![
        item("a", vec![1, 2, 3, 4], vec![3, 5, 4, 4], 1),
        item("b", vec![5, 6, 7, 8, 9, 2], vec![2, 2, 6, 3, 4, 3], 2),
    ]
}

/// One batch of everything, in order.
pub fn bucket() -> BucketConfig {
    BucketConfig {
        max_items: 8,
        max_padded_len: 1024,
        shuffle: false,
        seed: 1,
    }
}

/// Trains `config` on `items()` for `steps` steps (lr 1e-2, cosine to 1e-3, logged every
/// step) and returns the model and the metrics records.
pub fn overfit(config: &MultiStreamConfig, steps: usize) -> (MultiStreamModel, Vec<MetricsRecord>) {
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig { bucket: bucket() },
        train: MultiStreamData::new(items(), config, bucket()).expect("data"),
        valid: None,
        init: None,
    };
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
    device.seed(3);
    let outcome = Trainer::new(train, task, dir.path(), &device)
        .run(&mut ())
        .expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    (outcome.model, records)
}
