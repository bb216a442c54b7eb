//! The `after_step` hook: called once per applied step with a seed derived from (run seed,
//! step); state it writes into non-trainable module tensors is checkpointed, untouched by the
//! optimizer, and an interrupted run resumes to the same values as an uninterrupted one.

use std::sync::{Mutex, MutexGuard};

use burn::module::{Module, Param, ParamId};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_train::{BatchSource, Losses, OptimConfig, TrainConfig, TrainTask, Trainer};

/// Flex's RNG is process-global: tests that seed it must not interleave.
static RNG: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Module, Debug)]
struct WithBuffer {
    linear: Linear,
    /// `[1]`, never trained: the hook adds `1 + (seed mod 1000) / 1000` each step.
    counter: Param<Tensor<1>>,
}

struct Data;

impl BatchSource<Tensor<2>> for Data {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        2
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<Tensor<2>> {
        let v: Vec<f32> = (0..6)
            .map(|i| ((epoch * 5 + index * 3 + i) as f32).sin())
            .collect();
        Ok(Tensor::from_data(TensorData::new(v, [3, 2]), device))
    }
}

#[derive(Default)]
struct Task {
    /// (step, seed, batches) of every hook call.
    calls: Mutex<Vec<(usize, u64, usize)>>,
}

impl TrainTask for Task {
    type Model = WithBuffer;
    type Batch = Tensor<2>;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<WithBuffer> {
        Ok(WithBuffer {
            linear: LinearConfig::new(2, 1).init(device),
            counter: Param::initialized(ParamId::new(), Tensor::zeros([1], device))
                .set_require_grad(false),
        })
    }

    fn train_data(&self) -> &dyn BatchSource<Tensor<2>> {
        &Data
    }

    fn batch_items(&self, batch: &Tensor<2>) -> usize {
        batch.dims()[0]
    }

    fn loss(
        &self,
        model: &WithBuffer,
        batch: &Tensor<2>,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let y = model.linear.forward(batch.clone());
        Ok(Losses::total((y.add_scalar(-1.0)).square().mean()))
    }

    fn after_step(
        &self,
        mut model: WithBuffer,
        batches: &[Tensor<2>],
        step: usize,
        seed: u64,
    ) -> voxspec_train::Result<WithBuffer> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((step, seed, batches.len()));
        }
        let add = 1.0 + (seed % 1000) as f32 / 1000.0;
        let value = model.counter.val().detach().add_scalar(add);
        model.counter = Param::initialized(model.counter.id, value).set_require_grad(false);
        Ok(model)
    }
}

fn config(max_steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 3,
        max_steps,
        grad_accum: 2,
        optimizer: OptimConfig {
            lr: 1e-2,
            weight_decay: 0.5,
            ..OptimConfig::default()
        },
        checkpoint_every: 2,
        tensorboard: false,
        ..TrainConfig::default()
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().unwrap()
}

#[test]
fn hook_runs_once_per_step_and_its_state_resumes_exactly() {
    let _guard = serial();
    let device = Device::flex().autodiff();

    let full_dir = tempfile::tempdir().unwrap();
    let full = Trainer::new(config(5), Task::default(), full_dir.path(), &device);
    let out = full.run(&mut ()).unwrap();
    let calls = full.task().calls.lock().unwrap().clone();
    assert_eq!(
        calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert!(
        calls.iter().all(|c| c.2 == 2),
        "every micro-batch is passed"
    );
    let seeds: Vec<u64> = calls.iter().map(|c| c.1).collect();
    assert!(
        seeds.windows(2).all(|w| w[0] != w[1]),
        "seeds differ per step"
    );
    // The optimizer (weight decay 0.5) never touched the buffer: exactly the hook's sum.
    let want: f32 = seeds.iter().map(|s| 1.0 + (s % 1000) as f32 / 1000.0).sum();
    let counter = values(out.model.counter.val())[0];
    assert!((counter - want).abs() < 1e-5, "{counter} vs {want}");

    // Interrupted after 3 steps (checkpoint at 2 and at the end), then resumed to 5.
    let dir = tempfile::tempdir().unwrap();
    let first = Trainer::new(config(3), Task::default(), dir.path(), &device);
    first.run(&mut ()).unwrap();
    let second = Trainer::new(config(5), Task::default(), dir.path(), &device);
    let resumed = second.run(&mut ()).unwrap();
    let resumed_calls = second.task().calls.lock().unwrap().clone();
    assert_eq!(resumed_calls, calls[3..].to_vec());
    assert_eq!(
        values(resumed.model.counter.val()),
        values(out.model.counter.val())
    );
    assert_eq!(
        values(resumed.model.linear.weight.val()),
        values(out.model.linear.weight.val())
    );
}

#[test]
fn with_two_replicas_the_hook_gets_every_micro_batch_on_the_main_device() {
    let _guard = serial();
    let device = Device::flex().autodiff();
    let dir = tempfile::tempdir().unwrap();
    let trainer = Trainer::new(config(2), Task::default(), dir.path(), &device)
        .with_devices(&[device.clone(), device.clone()]);
    let out = trainer.run(&mut ()).unwrap();
    let calls = trainer.task().calls.lock().unwrap().clone();
    // grad_accum 2 per replica, 2 replicas: 4 micro-batches a step.
    assert_eq!(
        calls.iter().map(|c| (c.0, c.2)).collect::<Vec<_>>(),
        vec![(0, 4), (1, 4)]
    );
    let want: f32 = calls
        .iter()
        .map(|c| 1.0 + (c.1 % 1000) as f32 / 1000.0)
        .sum();
    let counter = values(out.model.counter.val())[0];
    assert!((counter - want).abs() < 1e-5, "{counter} vs {want}");
}
