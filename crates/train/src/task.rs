//! What a task supplies to the loop: a model, batches addressed by (epoch, index), and losses.

use burn::module::Module;
use burn::tensor::{Device, Tensor};

use crate::error::Result;

/// The losses of one batch: the scalar that is differentiated and the named terms that are logged.
#[derive(Debug, Clone)]
pub struct Losses {
    /// The objective, shape `[1]`.
    pub total: Tensor<1>,
    /// Named terms (each shape `[1]`), logged as they are; `total` is logged as `loss`.
    pub terms: Vec<(String, Tensor<1>)>,
}

impl Losses {
    /// A loss with no separate terms.
    pub fn total(total: Tensor<1>) -> Self {
        Self {
            total,
            terms: Vec::new(),
        }
    }
}

/// A deterministic batch plan: batch `index` of `epoch` is always the same batch, so the data
/// position is two integers in the checkpoint (build it on e.g. `voxspec_data::bucket_batches`
/// with the epoch mixed into the shuffle seed).
pub trait BatchSource<B> {
    /// Number of batches in `epoch` (0 ends training early with an error).
    fn batches_in_epoch(&self, epoch: usize) -> usize;
    /// Batch `index` of `epoch`, on `device`.
    fn batch(&self, epoch: usize, index: usize, device: &Device) -> Result<B>;
}

/// One optimizer phase: its own parameters, optimizer (state) and loss.
///
/// A single-phase task (the default) trains every unfrozen parameter. A GAN declares e.g.
/// `generator` and `discriminator`; each step runs the phases in order on the same batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    /// Name used in metric keys (`<name>/loss`), optimizer files and `phase_optimizers`.
    pub name: String,
    /// Regexes over parameter paths this phase updates; empty means all parameters.
    pub params: Vec<String>,
}

impl Phase {
    /// A phase over every parameter.
    pub fn all(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            params: Vec::new(),
        }
    }

    /// A phase over the parameters whose path matches one of `patterns`.
    pub fn matching(name: impl Into<String>, patterns: &[&str]) -> Self {
        Self {
            name: name.into(),
            params: patterns.iter().map(|p| p.to_string()).collect(),
        }
    }
}

/// A training task: everything the loop cannot know.
///
/// With several devices ([`crate::Trainer::with_devices`]) the replicas share the task and
/// their batches across threads, hence `Sync`.
pub trait TrainTask: Sync {
    /// The model being trained.
    type Model: Module;
    /// A batch, already on its device.
    type Batch: Sync;

    /// A freshly initialised model on `device` (the loop seeds the device first; on resume the
    /// weights are then replaced from the checkpoint). With several devices this is the main
    /// device; the loop forks the model to the others.
    fn init_model(&self, device: &Device) -> Result<Self::Model>;

    /// Training batches.
    fn train_data(&self) -> &dyn BatchSource<Self::Batch>;

    /// Validation batches (epoch 0 is used), if any.
    fn valid_data(&self) -> Option<&dyn BatchSource<Self::Batch>> {
        None
    }

    /// Items in a batch (utterances or tokens), for throughput.
    fn batch_items(&self, batch: &Self::Batch) -> usize;

    /// The optimizer phases, run in this order every step.
    fn phases(&self) -> Vec<Phase> {
        vec![Phase::all("main")]
    }

    /// Losses of `batch` for phase `phase` (an index into [`TrainTask::phases`]).
    fn loss(&self, model: &Self::Model, batch: &Self::Batch, phase: usize) -> Result<Losses>;

    /// Called once after every optimizer step whose updates were applied (all phases done),
    /// before the step is logged or checkpointed, with the step's micro-batches (those of every
    /// replica, on the main device, which holds the model): the place for
    /// state that is not learnt by gradient, such as EMA codebooks (k-means initialisation,
    /// EMA statistics, dead-code restarts). `step` is the 0-based index of the step just
    /// taken and `seed` a value derived from the run seed and `step`, so any randomness is
    /// reproduced on resume. Whatever it changes must live in the model's saved tensors
    /// (parameters with `require_grad = false`) for resume to stay exact. Not called for
    /// skipped (non-finite) steps. The default returns the model unchanged.
    fn after_step(
        &self,
        model: Self::Model,
        _batches: &[Self::Batch],
        _step: usize,
        _seed: u64,
    ) -> Result<Self::Model> {
        Ok(model)
    }

    /// The task's own configuration (model config, data), saved in `config.json` under `task`.
    fn config(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}
