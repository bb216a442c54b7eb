//! Exact resume with a realistic model: a voxspec-nn transformer with dropout.

use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::store::{ModuleSnapshot, SafetensorsStore};
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_nn::{Transformer, TransformerConfig};
use voxspec_train::{
    BatchSource, Losses, LrSchedule, OptimConfig, TrainConfig, TrainTask, Trainer,
};

const BATCH: usize = 2;
const TIME: usize = 8;

struct Sequences {
    d_model: usize,
}

impl BatchSource<(Tensor<3>, Tensor<3>)> for Sequences {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        5
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<(Tensor<3>, Tensor<3>)> {
        let n = BATCH * TIME * self.d_model;
        let base = (epoch * 31 + index) as f32;
        let x: Vec<f32> = (0..n).map(|i| (0.37 * i as f32 + base).sin()).collect();
        let y: Vec<f32> = x.iter().rev().map(|v| 0.5 * v).collect();
        let shape = [BATCH, TIME, self.d_model];
        Ok((
            Tensor::from_data(TensorData::new(x, shape), device),
            Tensor::from_data(TensorData::new(y, shape), device),
        ))
    }
}

struct Denoise {
    config: TransformerConfig,
    data: Sequences,
}

impl TrainTask for Denoise {
    type Model = Transformer;
    type Batch = (Tensor<3>, Tensor<3>);

    fn init_model(&self, device: &Device) -> voxspec_train::Result<Transformer> {
        self.config
            .init(device)
            .map_err(voxspec_train::TrainError::task)
    }

    fn train_data(&self) -> &dyn BatchSource<Self::Batch> {
        &self.data
    }

    fn batch_items(&self, batch: &Self::Batch) -> usize {
        batch.0.dims()[0] * batch.0.dims()[1]
    }

    fn loss(
        &self,
        model: &Transformer,
        (x, y): &Self::Batch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let out = model
            .forward(x.clone(), None)
            .map_err(voxspec_train::TrainError::task)?;
        Ok(Losses::total((out - y.clone()).square().mean()))
    }
}

fn task() -> Denoise {
    let config = TransformerConfig::tiny().with_dropout(0.1);
    Denoise {
        data: Sequences {
            d_model: config.d_model,
        },
        config,
    }
}

fn config(max_steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 11,
        max_steps,
        grad_accum: 2,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 2,
            schedule: LrSchedule::InverseSqrt,
            clip_grad_norm: Some(1.0),
            ..OptimConfig::default()
        },
        checkpoint_every: 3,
        tensorboard: false,
        ..TrainConfig::default()
    }
}

#[test]
fn transformer_resume_is_bit_exact() {
    let device = Device::flex();
    let straight = tempfile::tempdir().expect("tempdir");
    Trainer::new(config(6), task(), straight.path(), &device)
        .run(&mut ())
        .expect("straight run");
    let resumed = tempfile::tempdir().expect("tempdir");
    Trainer::new(config(3), task(), resumed.path(), &device)
        .run(&mut ())
        .expect("first half");
    Trainer::new(config(6), task(), resumed.path(), &device)
        .run(&mut ())
        .expect("second half");

    let first = weights(&straight.path().join("checkpoint-000003"));
    let (a, b) = (
        weights(&straight.path().join("checkpoint-000006")),
        weights(&resumed.path().join("checkpoint-000006")),
    );
    assert_ne!(first, a, "training moved the weights");
    assert!(a == b, "the weights of both runs are bit-identical");
}

/// Every float parameter of a checkpoint's `model.safetensors`, in visiting order.
fn weights(checkpoint: &Path) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let values = param.val().into_data().try_into_vec::<f32>();
            self.0.push(values.expect("f32 parameter"));
        }
    }
    let device = Device::flex();
    let mut model = task().init_model(&device).expect("model");
    let mut store = SafetensorsStore::from_file(checkpoint.join("model.safetensors"));
    let applied = model.load_from(&mut store).expect("load");
    assert!(applied.is_success(), "{applied}");
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}
