//! End-to-end tests of the loop on a small MLP regression task.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_train::{
    BatchSource, Losses, LrSchedule, OptimConfig, Phase, StepReport, TrainConfig, TrainError,
    TrainObserver, TrainTask, Trainer, latest_checkpoint, list_checkpoints, param_paths,
    read_metrics,
};

const IN: usize = 4;

/// Flex's RNG is process-global: tests that seed it must not interleave.
static RNG: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Module, Debug)]
struct Mlp {
    l1: Linear,
    l2: Linear,
    dropout: Dropout,
}

impl Mlp {
    /// `[batch, IN]` → `[batch, 1]`
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.l2
            .forward(self.dropout.forward(relu(self.l1.forward(x))))
    }
}

struct Batch {
    x: Tensor<2>,
    y: Tensor<2>,
    nan: bool,
}

/// Batch `index` of `epoch` holds samples `index * batch_size ..`; every value is a pure function
/// of (epoch, sample), so the plan is deterministic and checkpointable.
#[derive(Clone)]
struct Data {
    batch_size: usize,
    batches: usize,
    /// (epoch, index) pairs whose loss is NaN.
    nan: Vec<(usize, usize)>,
    /// From this (epoch, index) on, every loss is NaN.
    nan_from: Option<(usize, usize)>,
}

impl BatchSource<Batch> for Data {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        self.batches
    }

    fn batch(&self, epoch: usize, index: usize, device: &Device) -> voxspec_train::Result<Batch> {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for i in 0..self.batch_size {
            let s = (epoch * 7919 + index * self.batch_size + i) as f32;
            let x: Vec<f32> = (0..IN).map(|j| (1.3 * s + 0.7 * j as f32).sin()).collect();
            ys.push(
                x.iter()
                    .enumerate()
                    .map(|(j, v)| v * (j as f32 + 1.0) / 4.0)
                    .sum::<f32>()
                    - 0.5,
            );
            xs.extend(x);
        }
        Ok(Batch {
            x: Tensor::from_data(TensorData::new(xs, [self.batch_size, IN]), device),
            y: Tensor::from_data(TensorData::new(ys, [self.batch_size, 1]), device),
            nan: self.nan.contains(&(epoch, index))
                || self.nan_from.is_some_and(|f| (epoch, index) >= f),
        })
    }
}

struct Regression {
    train: Data,
    valid: Option<Data>,
    dropout: f64,
    phases: Vec<Phase>,
}

impl Regression {
    fn new() -> Self {
        Self {
            train: Data {
                batch_size: 4,
                batches: 3,
                nan: Vec::new(),
                nan_from: None,
            },
            valid: None,
            dropout: 0.2,
            phases: vec![Phase::all("main")],
        }
    }
}

impl TrainTask for Regression {
    type Model = Mlp;
    type Batch = Batch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<Mlp> {
        Ok(Mlp {
            l1: LinearConfig::new(IN, 16).init(device),
            l2: LinearConfig::new(16, 1).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
        })
    }

    fn train_data(&self) -> &dyn BatchSource<Batch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<Batch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<Batch>)
    }

    fn batch_items(&self, batch: &Batch) -> usize {
        batch.x.dims()[0]
    }

    fn phases(&self) -> Vec<Phase> {
        self.phases.clone()
    }

    fn loss(&self, model: &Mlp, batch: &Batch, _phase: usize) -> voxspec_train::Result<Losses> {
        let pred = model.forward(batch.x.clone());
        let mse = (pred - batch.y.clone()).square().mean();
        let abs = (model.forward(batch.x.clone()) - batch.y.clone())
            .abs()
            .mean();
        let total = if batch.nan {
            mse.mul_scalar(f32::NAN)
        } else {
            mse
        };
        Ok(Losses {
            total: total.clone(),
            terms: vec![("mse".into(), total), ("mae".into(), abs)],
        })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({ "dropout": self.dropout })
    }
}

fn config(max_steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 7,
        max_steps,
        grad_accum: 2,
        optimizer: OptimConfig {
            lr: 1e-2,
            warmup_steps: 2,
            schedule: LrSchedule::Cosine {
                decay_steps: 10,
                min_lr: 1e-3,
            },
            clip_grad_norm: Some(0.5),
            ..OptimConfig::default()
        },
        log_every: 1,
        checkpoint_every: 4,
        keep_checkpoints: 2,
        tensorboard: false,
        ..TrainConfig::default()
    }
}

fn device() -> Device {
    Device::flex().autodiff()
}

fn tensor_values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32 tensor")
}

/// [l1.weight, l1.bias, l2.weight, l2.bias]
fn weights(model: &Mlp) -> Vec<Vec<f32>> {
    let bias = |l: &Linear| tensor_values(l.bias.as_ref().expect("bias").val());
    vec![
        tensor_values(model.l1.weight.val()),
        bias(&model.l1),
        tensor_values(model.l2.weight.val()),
        bias(&model.l2),
    ]
}

fn run(config: TrainConfig, task: Regression, dir: &Path) -> voxspec_train::TrainOutcome<Mlp> {
    Trainer::new(config, task, dir, &device())
        .run(&mut ())
        .expect("training runs")
}

fn initial_weights(task: &Regression, seed: u64) -> Vec<Vec<f32>> {
    let device = device();
    device.seed(seed);
    weights(&task.init_model(&device).expect("model"))
}

#[test]
fn resume_after_a_kill_matches_an_uninterrupted_run() {
    let _rng = serial();
    let straight_dir = tempfile::tempdir().expect("tempdir");
    let straight = run(config(8), Regression::new(), straight_dir.path());
    assert_eq!(straight.step, 8);

    let dir = tempfile::tempdir().expect("tempdir");
    let first = run(config(4), Regression::new(), dir.path());
    assert_eq!(first.step, 4);
    drop(first); // the process dies: only the checkpoint directory is left
    let resumed = run(config(8), Regression::new(), dir.path());
    assert_eq!(resumed.step, 8);

    let (a, b) = (weights(&straight.model), weights(&resumed.model));
    assert_ne!(
        a,
        initial_weights(&Regression::new(), 7),
        "training moved the weights"
    );
    assert_eq!(
        a, b,
        "resumed weights are bit-identical to the uninterrupted run"
    );

    let steps: Vec<usize> = read_metrics(&dir.path().join("metrics.jsonl"))
        .expect("metrics")
        .iter()
        .map(|r| r.step)
        .collect();
    assert_eq!(steps, (1..=8).collect::<Vec<_>>());
    let kept: Vec<usize> = list_checkpoints(dir.path())
        .expect("list")
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(kept, vec![4, 8]);
    let ckpt = latest_checkpoint(dir.path())
        .expect("latest")
        .expect("some");
    for file in ["config.json", "model.safetensors", "train_state/state.json"] {
        assert!(ckpt.join(file).is_file(), "{file} in checkpoint");
    }
    assert!(ckpt.join("train_state/optimizer-main.bpk").is_file());
}

#[test]
fn a_nan_step_is_skipped_without_any_update() {
    let _rng = serial();
    // With grad_accum 2 and 3 batches per epoch, step 3 reads (1, 1) and (1, 2).
    let mut task = Regression::new();
    task.train.nan = vec![(1, 2)];
    let dir = tempfile::tempdir().expect("tempdir");
    let skipped = run(config(3), task, dir.path());
    assert_eq!(skipped.skipped_steps, 1);
    let reference = run(
        config(2),
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
    );
    assert_eq!(weights(&skipped.model), weights(&reference.model));
    let last = read_metrics(&dir.path().join("metrics.jsonl"))
        .expect("metrics")
        .pop()
        .expect("a record");
    assert_eq!(last.step, 3);
    assert_eq!(last.values["skipped_steps"], 1.0);
    assert!(
        !last.values.contains_key("loss"),
        "NaN values are not logged"
    );
}

#[test]
fn consecutive_nan_steps_abort_and_keep_the_last_good_checkpoint() {
    let _rng = serial();
    let mut task = Regression::new();
    task.train.nan_from = Some((2, 0)); // step 4 onwards (step 4 reads (1, 2) and (2, 0))
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(20);
    config.checkpoint_every = 2;
    config.max_consecutive_nonfinite = 3;
    let error = Trainer::new(config.clone(), task, dir.path(), &device())
        .run(&mut ())
        .expect_err("aborts");
    let TrainError::NonFinite {
        step,
        count,
        last_checkpoint,
    } = &error
    else {
        panic!("unexpected error {error}");
    };
    assert_eq!((*step, *count), (6, 3));
    let good = dir.path().join("checkpoint-000002");
    assert_eq!(last_checkpoint.as_deref(), Some(good.as_path()));
    assert!(error.to_string().contains("checkpoint-000002"), "{error}");
    assert_eq!(latest_checkpoint(dir.path()).expect("latest"), Some(good));
    // The checkpoint is intact: a clean run resumes from it.
    config.max_steps = 4;
    let resumed = run(config, Regression::new(), dir.path());
    assert_eq!((resumed.step, resumed.skipped_steps), (4, 0));
}

struct StopAt {
    step: usize,
    flag: Arc<AtomicBool>,
    checkpoints: Vec<usize>,
}

impl TrainObserver for StopAt {
    fn on_step(&mut self, report: &StepReport) {
        if report.step == self.step {
            self.flag.store(true, Ordering::SeqCst);
        }
    }
    fn on_checkpoint(&mut self, step: usize, _dir: &Path) {
        self.checkpoints.push(step);
    }
}

#[test]
fn the_stop_flag_checkpoints_and_returns() {
    let _rng = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(10);
    config.checkpoint_every = 0;
    let trainer = Trainer::new(config.clone(), Regression::new(), dir.path(), &device());
    let mut observer = StopAt {
        step: 3,
        flag: trainer.stop_flag(),
        checkpoints: Vec::new(),
    };
    let stopped = trainer.run(&mut observer).expect("stops cleanly");
    assert!(stopped.stopped);
    assert_eq!(stopped.step, 3);
    assert_eq!(observer.checkpoints, vec![3]);
    assert_eq!(
        stopped.last_checkpoint,
        Some(dir.path().join("checkpoint-000003"))
    );
    let finished = run(config.clone(), Regression::new(), dir.path());
    assert!(!finished.stopped);
    assert_eq!(finished.step, 10);
    let straight = run(
        config,
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
    );
    assert_eq!(weights(&finished.model), weights(&straight.model));
}

#[test]
fn the_logged_gradient_norm_is_the_global_norm_before_clipping() {
    let _rng = serial();
    let mut task = Regression::new();
    task.dropout = 0.0;
    let device = device();
    device.seed(7);
    let model = task.init_model(&device).expect("model");
    let batch = task.train.batch(0, 0, &device).expect("batch");
    let grads = task.loss(&model, &batch, 0).expect("loss").total.backward();
    let sq = |t: Tensor<2>| f64::from(t.square().sum().into_scalar::<f32>());
    let sq1 = |t: Tensor<1>| f64::from(t.square().sum().into_scalar::<f32>());
    let bias = |l: &Linear| l.bias.as_ref().expect("bias").grad(&grads).expect("grad");
    let expected = (sq(model.l1.weight.grad(&grads).expect("grad"))
        + sq1(bias(&model.l1))
        + sq(model.l2.weight.grad(&grads).expect("grad"))
        + sq1(bias(&model.l2)))
    .sqrt();

    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(1);
    config.grad_accum = 1;
    config.optimizer.clip_grad_norm = Some(expected / 10.0);
    run(config, task, dir.path());
    let record = read_metrics(&dir.path().join("metrics.jsonl"))
        .expect("metrics")
        .pop()
        .expect("record");
    let logged = record.values["grad_norm"];
    assert!(
        (logged - expected).abs() <= 1e-5 * expected,
        "logged {logged}, expected {expected}"
    );
}

#[test]
fn frozen_parameters_stay_identical_and_get_no_optimizer_state() {
    let _rng = serial();
    let task = Regression::new();
    let paths: Vec<String> = param_paths(&task.init_model(&device()).expect("model"))
        .into_iter()
        .map(|(p, _, _)| p)
        .collect();
    assert_eq!(paths, ["l1.weight", "l1.bias", "l2.weight", "l2.bias"]);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut frozen = config(4);
    frozen.freeze = vec![r"^l1\.".into()];
    let before = initial_weights(&task, 7);
    let trained = run(frozen, task, dir.path());
    let after = weights(&trained.model);
    assert_eq!(after[..2], before[..2], "frozen l1 is bit-identical");
    assert_ne!(after[2], before[2], "l2 trained");
    assert_ne!(after[3], before[3], "l2 bias trained");

    let record = burn::optim::OptimizerRecord::load(
        dir.path()
            .join("checkpoint-000004/train_state/optimizer-main.bpk"),
    )
    .expect("optimizer record");
    let unfrozen_dir = tempfile::tempdir().expect("tempdir");
    run(config(4), Regression::new(), unfrozen_dir.path());
    let full = burn::optim::OptimizerRecord::load(
        unfrozen_dir
            .path()
            .join("checkpoint-000004/train_state/optimizer-main.bpk"),
    )
    .expect("optimizer record");
    // AdamW keeps the same number of state tensors per parameter: 2 of 4 parameters have state.
    assert!(!record.is_empty());
    assert_eq!(record.len() * 2, full.len());
}

#[test]
fn alternating_phases_move_only_their_own_parameters() {
    let _rng = serial();
    let mut two = Regression::new();
    two.phases = vec![
        Phase::matching("generator", &[r"^l1\."]),
        Phase::matching("discriminator", &[r"^l2\."]),
    ];
    let mut one = Regression::new();
    one.phases = vec![Phase::matching("generator", &[r"^l1\."])];
    let before = initial_weights(&one, 7);
    let dir = tempfile::tempdir().expect("tempdir");
    let both = weights(&run(config(1), two, dir.path()).model);
    let gen_only = weights(&run(config(1), one, tempfile::tempdir().expect("t").path()).model);

    // The generator phase moved l1 and nothing else.
    assert_ne!(gen_only[0], before[0]);
    assert_eq!(gen_only[2..], before[2..]);
    // The discriminator phase then moved l2 and left l1 as the generator phase left it.
    assert_eq!(both[..2], gen_only[..2]);
    assert_ne!(both[2], before[2]);

    let ckpt = dir.path().join("checkpoint-000001/train_state");
    assert!(ckpt.join("optimizer-generator.bpk").is_file());
    assert!(ckpt.join("optimizer-discriminator.bpk").is_file());
    let record = read_metrics(&dir.path().join("metrics.jsonl"))
        .expect("metrics")
        .pop()
        .expect("record");
    for key in [
        "generator/loss",
        "discriminator/loss",
        "generator/grad_norm",
        "discriminator/lr",
    ] {
        assert!(
            record.values.contains_key(key),
            "{key} in {:?}",
            record.values
        );
    }
}

#[test]
fn accumulation_averages_like_one_large_batch() {
    let _rng = serial();
    let mut accumulated = config(1);
    accumulated.grad_accum = 2;
    let mut large = accumulated.clone();
    large.grad_accum = 1;
    let small_batches = |batch_size| {
        let mut task = Regression::new();
        task.dropout = 0.0;
        task.train.batch_size = batch_size;
        task
    };
    let a = weights(
        &run(
            accumulated,
            small_batches(4),
            tempfile::tempdir().expect("t").path(),
        )
        .model,
    );
    let b = weights(
        &run(
            large,
            small_batches(8),
            tempfile::tempdir().expect("t").path(),
        )
        .model,
    );
    let max_diff = a
        .iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(max_diff < 1e-5, "max diff {max_diff}");
}

#[test]
fn metrics_validation_and_tensorboard_are_written() {
    let _rng = serial();
    let mut task = Regression::new();
    task.valid = Some(Data {
        batch_size: 8,
        batches: 2,
        nan: Vec::new(),
        nan_from: None,
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(4);
    config.log_every = 2;
    config.valid_every = 2;
    config.tensorboard = true;
    run(config, task, dir.path());
    let records = read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    let train: Vec<_> = records.iter().filter(|r| r.split == "train").collect();
    let valid: Vec<_> = records.iter().filter(|r| r.split == "valid").collect();
    assert_eq!(train.iter().map(|r| r.step).collect::<Vec<_>>(), [2, 4]);
    assert_eq!(valid.iter().map(|r| r.step).collect::<Vec<_>>(), [2, 4]);
    for key in ["loss", "mse", "mae", "lr", "grad_norm", "items_per_sec"] {
        let value = train[1].values[key];
        assert!(value.is_finite() && value > 0.0, "{key} = {value}");
    }
    assert_eq!(train[0].values["lr"], 1e-2, "step 2 ends the warm-up");
    for key in ["loss", "mse", "mae"] {
        assert!(valid[1].values[key] > 0.0, "valid {key}");
    }
    let events = std::fs::read_dir(dir.path())
        .expect("run dir")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("events.out.tfevents")
        })
        .count();
    assert!(events >= 1, "a TensorBoard event file");
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("checkpoint-000004/config.json")).expect("config"),
    )
    .expect("json");
    assert_eq!(saved["train"]["max_steps"], 4);
    assert_eq!(saved["task"]["dropout"], 0.2);
}

/// The events of every TensorBoard file in `dir`, files in name (= creation time) order:
/// `(step, Some(tag))` for a scalar, `(step, None)` for a SessionLog START.
fn tensorboard_events(dir: &Path) -> Vec<(i64, Option<String>)> {
    use protobuf::Message;
    use tensorboard_proto::event::{Event, SessionLog_SessionStatus};
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("run dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("events.out.tfevents"))
        })
        .collect();
    files.sort();
    let mut events = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).expect("event file");
        let mut at = 0;
        // Records: u64 length, u32 CRC of it, the data, u32 CRC of the data.
        while at + 12 <= bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            let data = &bytes[at + 12..at + 12 + len];
            at += 12 + len + 4;
            let event = Event::parse_from_bytes(data).expect("an event");
            if event.has_session_log() {
                assert_eq!(
                    event.get_session_log().get_status(),
                    SessionLog_SessionStatus::START
                );
                events.push((event.get_step(), None));
            } else if event.has_summary() {
                for value in event.get_summary().get_value() {
                    events.push((event.get_step(), Some(value.get_tag().to_string())));
                }
            }
        }
    }
    events
}

#[test]
fn a_resumed_run_logs_every_step_once() {
    let _rng = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(6);
    cfg.tensorboard = true;
    run(cfg.clone(), Regression::new(), dir.path());
    // Killed after logging steps 5 and 6, before their checkpoint: only checkpoint 4 is left.
    std::fs::remove_dir_all(dir.path().join("checkpoint-000006")).expect("remove");
    // Event files are named by the second they were opened (and the process id).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    cfg.max_steps = 8;
    let resumed = run(cfg, Regression::new(), dir.path());
    assert_eq!(resumed.step, 8);
    let steps: Vec<usize> = read_metrics(&dir.path().join("metrics.jsonl"))
        .expect("metrics")
        .iter()
        .map(|r| r.step)
        .collect();
    assert_eq!(steps, (1..=8).collect::<Vec<_>>(), "metrics.jsonl");
    // What TensorBoard shows: a START at step s drops every earlier event at step ≥ s.
    let mut shown: Vec<(i64, String)> = Vec::new();
    for (step, tag) in tensorboard_events(dir.path()) {
        match tag {
            None => shown.retain(|(s, _)| *s < step),
            Some(tag) => shown.push((step, tag)),
        }
    }
    let loss: Vec<i64> = shown
        .iter()
        .filter(|(_, tag)| tag == "train/loss")
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(
        loss,
        (1..=8).collect::<Vec<_>>(),
        "TensorBoard's train/loss"
    );
}

/// Runs `config` data-parallel over `replicas` flex replicas (one device, several threads).
fn run_replicas(
    config: TrainConfig,
    task: Regression,
    dir: &Path,
    replicas: usize,
) -> voxspec_train::TrainOutcome<Mlp> {
    Trainer::new(config, task, dir, &device())
        .with_devices(&vec![device(); replicas])
        .run(&mut ())
        .expect("training runs")
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max)
}

#[test]
fn two_replicas_on_half_batches_match_one_device_on_the_full_batch() {
    let _rng = serial();
    let mut config = config(4);
    config.grad_accum = 1;
    // Batch (e, i) of 8 samples holds batches (e, 2i) and (e, 2i + 1) of 4: the replicas of a
    // step read the two halves of the single device's batch, across an epoch boundary too.
    let task = |batch_size, batches| {
        let mut task = Regression::new();
        task.dropout = 0.0;
        task.train.batch_size = batch_size;
        task.train.batches = batches;
        task
    };
    let single = run(
        config.clone(),
        task(8, 3),
        tempfile::tempdir().expect("t").path(),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let parallel = run_replicas(config, task(4, 6), dir.path(), 2);
    let (a, b) = (weights(&single.model), weights(&parallel.model));
    assert_ne!(
        a,
        initial_weights(&task(8, 3), 7),
        "training moved the weights"
    );
    let diff = max_abs_diff(&a, &b);
    assert!(diff < 1e-5, "max diff {diff}");
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("checkpoint-000004/train_state/state.json"))
            .expect("state"),
    )
    .expect("json");
    assert_eq!(state["replicas"], 2);
    assert_eq!(
        (state["epoch"].as_u64(), state["batch_index"].as_u64()),
        (Some(1), Some(2))
    );
}

#[test]
fn replicas_step_like_one_device_accumulating_their_micro_batches_dropout_included() {
    let _rng = serial();
    // Replica r of a step reseeds the RNG as micro-batch r does on one device, and the replica
    // gradients are summed in the same order: the weights are bit-identical.
    let mut accumulated = config(3);
    accumulated.grad_accum = 2;
    let single = run(
        accumulated,
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
    );
    let mut per_replica = config(3);
    per_replica.grad_accum = 1;
    let parallel = run_replicas(
        per_replica,
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
        2,
    );
    assert_eq!(weights(&single.model), weights(&parallel.model));
}

#[test]
fn a_data_parallel_run_resumes_exactly() {
    let _rng = serial();
    let mut config = config(6);
    config.grad_accum = 1;
    config.checkpoint_every = 3;
    let straight = run_replicas(
        config.clone(),
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
        2,
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = config.clone();
    first.max_steps = 3;
    drop(run_replicas(first, Regression::new(), dir.path(), 2));
    let resumed = run_replicas(config, Regression::new(), dir.path(), 2);
    assert_eq!(resumed.step, 6);
    assert_eq!(weights(&straight.model), weights(&resumed.model));
}

#[test]
fn an_empty_device_list_is_refused() {
    let error = Trainer::new(
        config(1),
        Regression::new(),
        tempfile::tempdir().expect("t").path(),
        &device(),
    )
    .with_devices(&[])
    .run(&mut ())
    .expect_err("no device");
    assert!(error.to_string().contains("devices"), "{error}");
}
