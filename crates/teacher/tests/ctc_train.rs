//! Training the CTC teacher through `voxspec_train` on a few utterances of the bundled corpus:
//! the loss falls, the batch plan is deterministic, a resumed run equals an uninterrupted one,
//! and TensorBoard's event file holds one scalar per logged step (parsed back by hand: TFRecord
//! framing with masked CRC-32C, protobuf `Event` / `Summary.Value`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use burn::tensor::Device;
use voxspec_data::{NoProgress, Normalization, TextTokenizer, TokenizerKind, Utterance};
use voxspec_teacher::ctc::{CtcModelConfig, CtcTask, CtcTaskConfig};
use voxspec_train::{LrSchedule, OptimConfig, TrainConfig, TrainTask, Trainer, read_metrics};

/// Flex's RNG is process-global: runs that seed it must not interleave.
static RNG: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|p| p.into_inner())
}

fn minitts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts")
}

/// The first `n` utterances of speaker 1001, chapter 1.
fn utterances(n: usize) -> Vec<Utterance> {
    let dir = minitts().join("train-clean-100/1001/1");
    (1..=n)
        .map(|i| {
            let id = format!("1001_1_{i:06}_000000");
            let path = dir.join(format!("{id}.flac"));
            let text = std::fs::read_to_string(dir.join(format!("{id}.normalized.txt"))).unwrap();
            let info = voxspec_audio::probe(&path).unwrap();
            Utterance {
                id,
                speaker: "1001".into(),
                chapter: "1".into(),
                path: path.to_string_lossy().into_owned(),
                text,
                duration: info.duration_secs(),
                sample_rate: info.sample_rate,
                alignment: None,
            }
        })
        .collect()
}

fn task(n: usize) -> CtcTask {
    let utts = utterances(n);
    let tk = TextTokenizer::train(
        utts.iter().map(|u| u.text.as_str()),
        TokenizerKind::Char,
        &Normalization::default(),
    )
    .unwrap();
    let config = CtcTaskConfig::new(CtcModelConfig::tiny(tk.vocab_size()))
        .with_batch_size(2)
        .with_seed(3);
    let (task, reports) = CtcTask::new(config, tk, &utts, Some(&utts[..2]), &NoProgress).unwrap();
    assert_eq!(reports[0].kept, n);
    assert!(reports[0].cached);
    task
}

fn train_config(max_steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 11,
        max_steps,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 5,
            schedule: LrSchedule::Constant,
            ..OptimConfig::default()
        },
        log_every: 1,
        valid_every: 5,
        checkpoint_every: 0,
        tensorboard: true,
        ..TrainConfig::default()
    }
}

#[test]
fn batch_plan_is_deterministic_and_covers_the_epoch() {
    let task = task(4);
    let device = Device::flex();
    let data = task.train_data();
    assert_eq!(data.batches_in_epoch(0), 2);
    let a = data.batch(1, 1, &device).unwrap();
    let b = data.batch(1, 1, &device).unwrap();
    assert_eq!(a.ids, b.ids);
    assert_eq!(
        a.features
            .clone()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap(),
        b.features.into_data().try_into_vec::<f32>().unwrap()
    );
    let mut ids: Vec<String> = (0..2)
        .flat_map(|i| data.batch(0, i, &device).unwrap().ids)
        .collect();
    ids.sort();
    assert_eq!(ids.len(), 4);
    ids.dedup();
    assert_eq!(ids.len(), 4);
    // Batch sizes and frame counts: features are [batch, longest, 80], zero past each length.
    let [bs, frames, mels] = a.features.dims();
    assert_eq!((bs, mels), (2, 80));
    assert_eq!(frames, *a.lengths.iter().max().unwrap());
    assert!(data.batch(0, 2, &device).is_err());
}

#[test]
fn loss_falls_and_resume_is_exact_and_tensorboard_reads_back() {
    let _guard = serial();
    let device = Device::flex();
    let steps = 30;

    // Uninterrupted run.
    let full = tempfile::tempdir().unwrap();
    let outcome = Trainer::new(train_config(steps), task(4), full.path(), &device)
        .run(&mut ())
        .unwrap();
    assert_eq!(outcome.step, steps);
    let records = read_metrics(&full.path().join("metrics.jsonl")).unwrap();
    let train_loss: Vec<f64> = records
        .iter()
        .filter(|r| r.split == "train")
        .map(|r| r.values["loss"])
        .collect();
    assert_eq!(train_loss.len(), steps);
    let first = train_loss[..3].iter().sum::<f64>() / 3.0;
    let last = train_loss[steps - 3..].iter().sum::<f64>() / 3.0;
    assert!(last < 0.6 * first, "CTC loss {first} → {last}");
    let valid: Vec<_> = records.iter().filter(|r| r.split == "valid").collect();
    assert_eq!(valid.len(), steps / 5);
    assert!(
        valid
            .iter()
            .all(|r| (0.0..=10.0).contains(&r.values["cer"]))
    );

    // TensorBoard: one `train/loss` scalar per step, one `valid/cer` per validation, at the
    // logged steps and with the logged values.
    let events = read_events(full.path());
    let scalars = |tag: &str| -> Vec<(i64, f32)> {
        events
            .iter()
            .flat_map(|e| e.values.iter().map(move |(t, v)| (e.step, t, *v)))
            .filter(|(_, t, _)| t.as_str() == tag)
            .map(|(s, _, v)| (s, v))
            .collect()
    };
    let loss = scalars("train/loss");
    assert_eq!(loss.len(), steps);
    assert_eq!(
        loss.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        (1..=steps as i64).collect::<Vec<_>>()
    );
    for ((_, v), expected) in loss.iter().zip(&train_loss) {
        assert!((f64::from(*v) - expected).abs() < 1e-4 * expected.abs().max(1.0));
    }
    assert_eq!(scalars("valid/cer").len(), steps / 5);

    // A run that ends at step 12 (checkpoint), resumed to the end.
    let split = tempfile::tempdir().unwrap();
    let trainer = Trainer::new(train_config(12), task(4), split.path(), &device);
    assert_eq!(trainer.run(&mut ()).unwrap().step, 12);
    let resumed = Trainer::new(train_config(steps), task(4), split.path(), &device)
        .run(&mut ())
        .unwrap();
    assert_eq!(resumed.step, steps);
    let a = weights(&outcome.model);
    let b = weights(&resumed.model);
    assert_eq!(a.len(), b.len());
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert_eq!(diff, 0.0, "resumed run differs from the uninterrupted one");
}

fn weights(model: &voxspec_teacher::CtcModel) -> Vec<f32> {
    let mut all = model
        .head
        .weight
        .val()
        .into_data()
        .try_into_vec::<f32>()
        .unwrap();
    all.extend(
        model
            .conv_in
            .weight
            .val()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap(),
    );
    for block in &model.encoder.blocks {
        all.extend(
            block
                .mlp
                .down
                .weight
                .val()
                .into_data()
                .try_into_vec::<f32>()
                .unwrap(),
        );
    }
    all
}

/// One TensorBoard `Event` with its scalar summary values.
#[derive(Debug)]
struct Event {
    step: i64,
    values: Vec<(String, f32)>,
}

/// Reads every `events.out.tfevents.*` file of `dir`: TFRecord frames
/// (`u64 length, u32 masked_crc(length), data, u32 masked_crc(data)`), CRCs checked.
fn read_events(dir: &Path) -> Vec<Event> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("events.out.tfevents"))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no event file in {}", dir.display());
    let mut events = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let header = &bytes[pos..pos + 8];
            let len = u64::from_le_bytes(header.try_into().unwrap()) as usize;
            let len_crc = u32::from_le_bytes(bytes[pos + 8..pos + 12].try_into().unwrap());
            assert_eq!(len_crc, masked_crc32c(header), "length CRC at {pos}");
            let data = &bytes[pos + 12..pos + 12 + len];
            let data_crc =
                u32::from_le_bytes(bytes[pos + 12 + len..pos + 16 + len].try_into().unwrap());
            assert_eq!(data_crc, masked_crc32c(data), "data CRC at {pos}");
            events.push(parse_event(data));
            pos += 16 + len;
        }
    }
    events
}

/// CRC-32C (Castagnoli), masked as TFRecord does: `((crc >> 15) | (crc << 17)) + 0xa282ead8`.
fn masked_crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    let crc = !crc;
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Protobuf fields of one message: (field number, wire type, payload).
enum Field<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32(u32),
}

fn varint(data: &[u8], pos: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = data[*pos];
        *pos += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

fn fields(data: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let key = varint(data, &mut pos);
        let field = match key & 7 {
            0 => Field::Varint(varint(data, &mut pos)),
            1 => {
                pos += 8;
                Field::Fixed64
            }
            2 => {
                let len = varint(data, &mut pos) as usize;
                pos += len;
                Field::Bytes(&data[pos - len..pos])
            }
            5 => {
                pos += 4;
                Field::Fixed32(u32::from_le_bytes(data[pos - 4..pos].try_into().unwrap()))
            }
            w => panic!("unexpected wire type {w}"),
        };
        out.push((key >> 3, field));
    }
    out
}

/// `Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5 }`,
/// `Summary { repeated Value value = 1 }`, `Value { string tag = 1; float simple_value = 2 }`.
fn parse_event(data: &[u8]) -> Event {
    let mut event = Event {
        step: 0,
        values: Vec::new(),
    };
    for (number, field) in fields(data) {
        match (number, field) {
            (2, Field::Varint(step)) => event.step = step as i64,
            (5, Field::Bytes(summary)) => {
                for (n, value) in fields(summary) {
                    let (1, Field::Bytes(value)) = (n, value) else {
                        continue;
                    };
                    let mut tag = String::new();
                    let mut simple = None;
                    for (n, f) in fields(value) {
                        match (n, f) {
                            (1, Field::Bytes(t)) => tag = String::from_utf8(t.to_vec()).unwrap(),
                            (2, Field::Fixed32(bits)) => simple = Some(f32::from_bits(bits)),
                            _ => {}
                        }
                    }
                    if let Some(v) = simple {
                        event.values.push((tag, v));
                    }
                }
            }
            _ => {}
        }
    }
    event
}
