//! The training loop shared by every voxspec model.
//!
//! burn-train's `Learner` is not used: it checkpoints per epoch only (no per-step checkpoints, so
//! no exact resume mid-epoch and no data position), clips gradients per tensor instead of by
//! their global norm, has no non-finite guard, and drives one optimizer per model. This loop
//! steps Burn's type-erased `ModuleOptimizer` itself:
//!
//! ```text
//! every step:  k micro-batches (epoch, index) per replica from the task's deterministic plan
//!   for each phase (own parameters, AdamW state, loss):
//!     on each replica (its own thread, the model forked to its device):
//!       for each of its micro-batches: reseed the RNG, loss, backward, add the phase's gradients
//!     replica gradients moved to the main device and summed
//!     average, global L2 norm; non-finite → skip the update; else clip to `clip_grad_norm`
//!     AdamW step with the scheduled learning rate, on the main device
//!   the task's `after_step` hook (non-gradient state such as EMA codebooks)
//!   log / validate / checkpoint on their cadences; a raised stop flag checkpoints and returns
//! ```
//!
//! # Several devices
//!
//! [`Trainer::with_devices`] trains data-parallel with Burn's own multi-device mechanism, the
//! one burn-train's `ExecutionStrategy::MultiDevice(devices, MultiDeviceOptim::OptimMainDevice)`
//! uses: every phase forks the model to each device (`Module::fork`), each replica computes the
//! gradients of its own micro-batches, `GradientsParams::to_device` brings them to the first
//! (main) device where a `GradientsAccumulator` sums them, and one optimizer, on the main device,
//! takes one step. A step over `n` devices with `grad_accum = k` therefore averages `n · k`
//! micro-batches: the same update as one device with `grad_accum = n · k` (up to the order of
//! floating-point sums), so checkpoints, clipping, the non-finite guard and exact resume are
//! unchanged. Burn's other strategy, DDP (gradients all-reduced inside `backward` through
//! `burn::tensor::distributed`), is not used: its collectives exist for CubeCL backends (NCCL on
//! CUDA) but not for flex, where `all_reduce` is unimplemented, so nothing here could test it,
//! and it keeps one optimizer per device.
//!
//! The backends' RNG is process-wide (flex and CubeCL alike), so the replicas take a lock from
//! reseeding to the end of the loss graph: on flex, which computes eagerly, the random draws of
//! every micro-batch (dropout) are then the same as on one device. Backends that defer work
//! (CUDA with fusion) may draw after the lock is released; there only dropout-free tasks are
//! reproducible to the bit across runs.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::module::{Module, ParamId};
use burn::optim::{GradientsAccumulator, GradientsParams, ModuleOptimizer};
use burn::store::{ModuleSnapshot, SafetensorsStore};
use burn::tensor::Device;

use crate::checkpoint::{
    CheckpointConfig, CheckpointPaths, ParamIds, PendingCheckpoint, TrainState, latest_checkpoint,
    read_json, remove_stale_temporaries, write_json,
};
use crate::config::{OptimConfig, TrainConfig};
use crate::error::{Result, TrainError};
use crate::metrics::{MetricsLog, MetricsRecord};
use crate::params::{
    add_grads, assign_ids, grad_sq_norm, param_group, param_paths, scale_grads, select_params,
};
use crate::task::{Phase, TrainTask};
use crate::weights::load_weights;

/// What the observer sees after every step.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// Steps done.
    pub step: usize,
    /// Step budget of the run.
    pub max_steps: usize,
    /// Epoch of the next batch.
    pub epoch: usize,
    /// Losses, `lr`, `grad_norm`, `items_per_sec` (phase-prefixed when there are several phases).
    pub values: BTreeMap<String, f64>,
    /// Whether a non-finite loss or gradient skipped an update in this step.
    pub skipped: bool,
}

/// Progress callbacks (the CLI draws its progress bar from these).
pub trait TrainObserver {
    /// After every step.
    fn on_step(&mut self, _report: &StepReport) {}
    /// After every validation, with the mean of each term.
    fn on_validation(&mut self, _step: usize, _values: &BTreeMap<String, f64>) {}
    /// After a checkpoint is committed.
    fn on_checkpoint(&mut self, _step: usize, _dir: &Path) {}
}

/// An observer that ignores everything.
impl TrainObserver for () {}

/// How a run ended.
#[derive(Debug)]
pub struct TrainOutcome<M> {
    /// The trained model (on the autodiff device).
    pub model: M,
    /// Steps done.
    pub step: usize,
    /// True when the stop flag ended the run before `max_steps`.
    pub stopped: bool,
    /// Steps skipped for non-finite values, over the whole run (resumes included).
    pub skipped_steps: usize,
    /// The checkpoint written last.
    pub last_checkpoint: Option<PathBuf>,
}

/// Runs a [`TrainTask`] in a run directory, resuming from its newest checkpoint if there is one.
pub struct Trainer<T: TrainTask> {
    config: TrainConfig,
    task: T,
    run_dir: PathBuf,
    /// One autodiff device per model replica; the first holds the model and the optimizer.
    devices: Vec<Device>,
    stop: Arc<AtomicBool>,
}

/// Serialises "reseed the RNG, build the loss graph" across replica threads: Burn's backends keep
/// one process-wide RNG, so concurrent replicas would otherwise draw from each other's streams.
static RNG: Mutex<()> = Mutex::new(());

/// One replica's part of a phase.
struct ReplicaOutcome {
    /// Summed gradients of its micro-batches, on the replica's device.
    grads: GradientsParams,
    /// Summed loss terms (`loss` for the total).
    sums: BTreeMap<String, f64>,
    /// False when a loss was non-finite (its backward was skipped).
    finite: bool,
    /// Time in the losses and in their backward passes.
    clock: StepClock,
}

/// Result of one phase within a step.
struct PhaseOutcome<M> {
    model: M,
    terms: BTreeMap<String, f64>,
    grad_norm: Option<f64>,
    finite: bool,
    clock: StepClock,
}

/// Where a step's time went (with [`TrainConfig::time_phases`]; the device is synchronised at
/// each boundary so that deferred GPU work is counted where it was queued).
#[derive(Debug, Clone, Copy, Default)]
struct StepClock {
    forward: Duration,
    backward: Duration,
    optimizer: Duration,
}

impl std::ops::AddAssign for StepClock {
    fn add_assign(&mut self, other: Self) {
        self.forward += other.forward;
        self.backward += other.backward;
        self.optimizer += other.optimizer;
    }
}

impl<T: TrainTask> Trainer<T> {
    /// A trainer for `task` writing into `run_dir`; `device` gets autodiff if it lacks it.
    pub fn new(config: TrainConfig, task: T, run_dir: impl Into<PathBuf>, device: &Device) -> Self {
        Self {
            config,
            task,
            run_dir: run_dir.into(),
            devices: vec![with_autodiff(device)],
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Trains data-parallel on `devices` (see the module docs): one model replica per entry,
    /// each computing the gradients of `grad_accum` micro-batches per step; the first device
    /// holds the model, the optimizer and validation. An entry may repeat (several replicas on
    /// one device, e.g. to test on a CPU). Replaces the device given to [`Trainer::new`];
    /// [`Trainer::run`] refuses an empty list.
    pub fn with_devices(mut self, devices: &[Device]) -> Self {
        self.devices = devices.iter().map(with_autodiff).collect();
        self
    }

    /// Uses `stop` as the stop flag (checked between steps).
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = stop;
        self
    }

    /// The stop flag: set it to checkpoint and return after the current step.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The task.
    pub fn task(&self) -> &T {
        &self.task
    }

    /// Trains until `max_steps`, the stop flag, or an error.
    pub fn run(&self, observer: &mut dyn TrainObserver) -> Result<TrainOutcome<T::Model>> {
        let config = &self.config;
        config.validate()?;
        if self.devices.is_empty() {
            return Err(TrainError::Config {
                field: "devices",
                reason: "must list at least one device".into(),
            });
        }
        voxspec_nn::linear::set_matmul_precision(config.matmul).map_err(|e| {
            TrainError::Config {
                field: "matmul",
                reason: e.to_string(),
            }
        })?;
        let replicas = self.devices.len();
        fs::create_dir_all(&self.run_dir).map_err(|e| TrainError::io(&self.run_dir, e))?;
        remove_stale_temporaries(&self.run_dir)?;
        let phases = self.task.phases();
        check_phases(&phases)?;
        if let Some(unknown) = config
            .phase_optimizers
            .keys()
            .find(|name| !phases.iter().any(|p| &p.name == *name))
        {
            return Err(TrainError::Config {
                field: "phase_optimizers",
                reason: format!("names no phase of this task: {unknown:?}"),
            });
        }

        let main = self.main_device();
        main.seed(config.seed);
        let mut model = self.task.init_model(main)?;
        if !config.freeze.is_empty() {
            model = model.freeze_group(param_group(&config.freeze)?);
        }
        let mut optims: Vec<ModuleOptimizer> = phases
            .iter()
            .map(|p| config.optimizer_for(&p.name).init())
            .collect();
        let mut state = TrainState {
            step: 0,
            epoch: 0,
            batch_index: 0,
            seed: config.seed,
            skipped_steps: 0,
            consecutive_nonfinite: 0,
            replicas,
        };
        let mut last_checkpoint = latest_checkpoint(&self.run_dir)?;
        if let Some(dir) = &last_checkpoint {
            tracing::info!(checkpoint = %dir.display(), "resuming");
            (model, state) = self.load_checkpoint(dir, model, &phases, &mut optims)?;
            if state.replicas != replicas {
                tracing::warn!(
                    saved = state.replicas,
                    now = replicas,
                    "resuming on another number of devices: steps read another number of \
                     micro-batches and the run will not match an uninterrupted one"
                );
                state.replicas = replicas;
            }
        }
        let phase_params: Vec<Vec<ParamId>> = phases
            .iter()
            .map(|p| Ok(select_params(&model, &param_group(&p.params)?)))
            .collect::<Result<_>>()?;
        if let Some((phase, _)) = phases.iter().zip(&phase_params).find(|(_, p)| p.is_empty()) {
            return Err(TrainError::Phases {
                reason: format!(
                    "phase {:?} has no trainable parameter (all frozen or none matched)",
                    phase.name
                ),
            });
        }
        let mut log = MetricsLog::open(&self.run_dir, state.step, config.tensorboard)?;
        let mut checkpointed_at = last_checkpoint.as_ref().map(|_| state.step);
        let mut window_items = 0usize;
        let mut window_start = Instant::now();

        while state.step < config.max_steps {
            if self.stop.load(Ordering::SeqCst) {
                tracing::info!(step = state.step, "stop requested");
                if checkpointed_at != Some(state.step) {
                    let dir = self.save_checkpoint(&model, &phases, &optims, &state)?;
                    observer.on_checkpoint(state.step, &dir);
                    last_checkpoint = Some(dir);
                }
                return Ok(TrainOutcome {
                    model,
                    step: state.step,
                    stopped: true,
                    skipped_steps: state.skipped_steps,
                    last_checkpoint,
                });
            }
            let step_start = Instant::now();
            // Replica r reads micro-batches r·k .. (r+1)·k of the step, on its own device.
            let positions = (0..config.grad_accum * replicas)
                .map(|_| self.next_position(&mut state))
                .collect::<Result<Vec<_>>>()?;
            let data = self.task.train_data();
            let batches = positions
                .iter()
                .enumerate()
                .map(|(micro, &(epoch, index))| {
                    data.batch(epoch, index, &self.devices[micro / config.grad_accum])
                })
                .collect::<Result<Vec<_>>>()?;
            let items: usize = batches.iter().map(|b| self.task.batch_items(b)).sum();
            self.sync_if_timed()?;
            let data_time = step_start.elapsed();

            let mut values = BTreeMap::new();
            let mut skipped = false;
            let mut clock = StepClock::default();
            for (p, phase) in phases.iter().enumerate() {
                let optim_config = config.optimizer_for(&phase.name);
                let lr = optim_config.lr_at(state.step);
                let outcome = self.phase_step(
                    model,
                    &mut optims[p],
                    (p, &phase_params[p]),
                    &batches,
                    state.step,
                    (lr, optim_config),
                )?;
                model = outcome.model;
                clock += outcome.clock;
                skipped |= !outcome.finite;
                let prefix = phase_prefix(&phases, phase);
                for (key, value) in outcome.terms {
                    values.insert(format!("{prefix}{key}"), value);
                }
                values.insert(format!("{prefix}lr"), lr);
                if let Some(norm) = outcome.grad_norm {
                    values.insert(format!("{prefix}grad_norm"), norm);
                }
            }
            if !skipped {
                let seed = step_seed(config.seed, state.step, phases.len(), config.grad_accum);
                let batches = self.on_main_device(batches, &positions)?;
                model = self.task.after_step(model, &batches, state.step, seed)?;
            }
            state.step += 1;
            if skipped {
                state.skipped_steps += 1;
                state.consecutive_nonfinite += 1;
                tracing::warn!(
                    step = state.step,
                    in_a_row = state.consecutive_nonfinite,
                    "non-finite loss or gradient: update skipped"
                );
                if state.consecutive_nonfinite >= config.max_consecutive_nonfinite {
                    return Err(TrainError::NonFinite {
                        step: state.step,
                        count: state.consecutive_nonfinite,
                        last_checkpoint,
                    });
                }
            } else {
                state.consecutive_nonfinite = 0;
            }
            values.insert("skipped_steps".into(), state.skipped_steps as f64);
            if config.time_phases {
                values.insert("time_data".into(), data_time.as_secs_f64());
                values.insert("time_forward".into(), clock.forward.as_secs_f64());
                values.insert("time_backward".into(), clock.backward.as_secs_f64());
                values.insert("time_optimizer".into(), clock.optimizer.as_secs_f64());
            }
            values.retain(|_, v| v.is_finite());
            window_items += items;
            let step_secs = step_start.elapsed().as_secs_f64().max(1e-9);
            values.insert("items_per_sec".into(), items as f64 / step_secs);

            if state.step.is_multiple_of(config.log_every) || skipped {
                let mut logged = values.clone();
                let secs = window_start.elapsed().as_secs_f64().max(1e-9);
                logged.insert("items_per_sec".into(), window_items as f64 / secs);
                log.write(&MetricsRecord {
                    step: state.step,
                    split: "train".into(),
                    values: logged,
                })?;
                window_items = 0;
                window_start = Instant::now();
            }
            observer.on_step(&StepReport {
                step: state.step,
                max_steps: config.max_steps,
                epoch: state.epoch,
                values,
                skipped,
            });
            if config.valid_every > 0
                && state.step.is_multiple_of(config.valid_every)
                && let Some(values) = self.validate(&model, &phases)?
            {
                log.write(&MetricsRecord {
                    step: state.step,
                    split: "valid".into(),
                    values: values.clone(),
                })?;
                observer.on_validation(state.step, &values);
            }
            let at_end = state.step == config.max_steps;
            // During a run of non-finite steps only the final checkpoint is written, so the
            // newest periodic checkpoint is the last one taken after a good step.
            let periodic = config.checkpoint_every > 0
                && state.step.is_multiple_of(config.checkpoint_every)
                && state.consecutive_nonfinite == 0;
            if at_end || periodic {
                let dir = self.save_checkpoint(&model, &phases, &optims, &state)?;
                observer.on_checkpoint(state.step, &dir);
                last_checkpoint = Some(dir);
                checkpointed_at = Some(state.step);
            }
        }
        Ok(TrainOutcome {
            model,
            step: state.step,
            stopped: false,
            skipped_steps: state.skipped_steps,
            last_checkpoint,
        })
    }

    /// One phase of one step: gradients on every replica, sum, check, clip, update.
    fn phase_step(
        &self,
        model: T::Model,
        optim: &mut ModuleOptimizer,
        (phase, params): (usize, &[ParamId]),
        batches: &[T::Batch],
        step: usize,
        (lr, optim_config): (f64, &OptimConfig),
    ) -> Result<PhaseOutcome<T::Model>> {
        let k = batches.len() as f64;
        let (mut grads, sums, finite, mut clock) = if self.devices.len() == 1 {
            let main = (&model, self.main_device());
            let out = self.replica_grads(main, batches, 0, (phase, params), step)?;
            (out.grads, out.sums, out.finite, out.clock)
        } else {
            let started = Instant::now();
            let (grads, sums, finite) =
                self.data_parallel_grads(&model, batches, (phase, params), step)?;
            // Replicas run concurrently: their forward and backward are not separable here.
            let clock = StepClock {
                backward: started.elapsed(),
                ..StepClock::default()
            };
            (grads, sums, finite, clock)
        };
        let terms = sums.into_iter().map(|(k_, v)| (k_, v / k)).collect();
        if !finite {
            return Ok(PhaseOutcome {
                model,
                terms,
                grad_norm: None,
                finite,
                clock,
            });
        }
        let optimizer_start = Instant::now();
        // Mean over micro-batches, then one norm over every gradient tensor of the phase.
        let norm = grad_sq_norm(&model, &grads).sqrt() / k;
        if !norm.is_finite() {
            return Ok(PhaseOutcome {
                model,
                terms,
                grad_norm: Some(norm),
                finite: false,
                clock,
            });
        }
        let clip = optim_config
            .clip_grad_norm
            .map_or(1.0, |max| (max / (norm + 1e-6)).min(1.0));
        scale_grads(&model, &mut grads, clip / k);
        let model = optim.step(lr, model, grads);
        self.sync_if_timed()?;
        clock.optimizer += optimizer_start.elapsed();
        Ok(PhaseOutcome {
            model,
            terms,
            grad_norm: Some(norm),
            finite: true,
            clock,
        })
    }

    /// Summed gradients and loss terms of `batches` (micro-batches `first..` of the step) on
    /// `device`, where `model` and the batches are; stops at the first non-finite loss.
    fn replica_grads(
        &self,
        (model, device): (&T::Model, &Device),
        batches: &[T::Batch],
        first: usize,
        (phase, params): (usize, &[ParamId]),
        step: usize,
    ) -> Result<ReplicaOutcome> {
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        let mut grads = GradientsParams::new();
        let mut finite = true;
        let mut clock = StepClock::default();
        for (micro, batch) in (first..).zip(batches) {
            let forward_start = Instant::now();
            let losses = {
                let _rng = RNG.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                device.seed(step_seed(self.config.seed, step, phase, micro));
                self.task.loss(model, batch, phase)?
            };
            let total = f64::from(losses.total.clone().into_scalar::<f32>());
            *sums.entry("loss".into()).or_default() += total;
            for (name, term) in losses.terms {
                *sums.entry(name).or_default() += f64::from(term.into_scalar::<f32>());
            }
            // Reading the loss waited for the forward pass.
            clock.forward += forward_start.elapsed();
            if !total.is_finite() {
                finite = false;
                break;
            }
            let backward_start = Instant::now();
            let mut raw = losses.total.backward();
            let micro_grads = GradientsParams::from_params(&mut raw, model, params);
            add_grads(model, &mut grads, micro_grads);
            if self.config.time_phases {
                sync(device)?;
            }
            clock.backward += backward_start.elapsed();
        }
        Ok(ReplicaOutcome {
            grads,
            sums,
            finite,
            clock,
        })
    }

    /// [`Trainer::replica_grads`] on every device at once (one thread each, the model forked to
    /// each device), the gradients then summed on the main device.
    fn data_parallel_grads(
        &self,
        model: &T::Model,
        batches: &[T::Batch],
        (phase, params): (usize, &[ParamId]),
        step: usize,
    ) -> Result<(GradientsParams, BTreeMap<String, f64>, bool)> {
        let k = self.config.grad_accum;
        let main = self.main_device();
        let outcomes: Vec<Result<ReplicaOutcome>> = std::thread::scope(|scope| {
            let workers: Vec<_> = self
                .devices
                .iter()
                .zip(batches.chunks(k))
                .enumerate()
                .map(|(r, (device, share))| {
                    let replica = model.clone().fork(device);
                    scope.spawn(move || {
                        let at = (&replica, device);
                        let mut out =
                            self.replica_grads(at, share, r * k, (phase, params), step)?;
                        out.grads = out.grads.to_device(main, &replica);
                        Ok(out)
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| {
                    worker
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut accumulator = GradientsAccumulator::<T::Model>::new();
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        let mut finite = true;
        for outcome in outcomes {
            let outcome = outcome?;
            accumulator.accumulate(model, outcome.grads);
            for (name, value) in outcome.sums {
                *sums.entry(name).or_default() += value;
            }
            finite &= outcome.finite;
        }
        Ok((accumulator.grads(), sums, finite))
    }

    /// The step's micro-batches on the main device, for [`TrainTask::after_step`]: the ones
    /// already there are kept, the others are built again.
    fn on_main_device(
        &self,
        batches: Vec<T::Batch>,
        positions: &[(usize, usize)],
    ) -> Result<Vec<T::Batch>> {
        let main = self.main_device();
        let k = self.config.grad_accum;
        let data = self.task.train_data();
        batches
            .into_iter()
            .zip(positions)
            .enumerate()
            .map(|(micro, (batch, &(epoch, index)))| {
                if &self.devices[micro / k] == main {
                    Ok(batch)
                } else {
                    data.batch(epoch, index, main)
                }
            })
            .collect()
    }

    /// Waits for the main device's queued work when phases are timed.
    fn sync_if_timed(&self) -> Result<()> {
        if self.config.time_phases {
            sync(self.main_device())?;
        }
        Ok(())
    }

    /// The device holding the model and the optimizer.
    fn main_device(&self) -> &Device {
        &self.devices[0]
    }

    /// The (epoch, index) of the next training batch, advancing the data position across
    /// epochs.
    fn next_position(&self, state: &mut TrainState) -> Result<(usize, usize)> {
        let data = self.task.train_data();
        if state.batch_index >= data.batches_in_epoch(state.epoch) {
            state.epoch += 1;
            state.batch_index = 0;
        }
        if data.batches_in_epoch(state.epoch) == 0 {
            return Err(TrainError::EmptyEpoch { epoch: state.epoch });
        }
        let position = (state.epoch, state.batch_index);
        state.batch_index += 1;
        Ok(position)
    }

    /// Mean of each loss term over the validation batches, without autodiff.
    fn validate(
        &self,
        model: &T::Model,
        phases: &[Phase],
    ) -> Result<Option<BTreeMap<String, f64>>> {
        let Some(data) = self.task.valid_data() else {
            return Ok(None);
        };
        let device = self.main_device().clone().without_autodiff();
        let model = model.valid();
        let mut count = data.batches_in_epoch(0);
        if let Some(max) = self.config.valid_max_batches {
            count = count.min(max);
        }
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        for index in 0..count {
            let batch = data.batch(0, index, &device)?;
            for (p, phase) in phases.iter().enumerate() {
                let prefix = phase_prefix(phases, phase);
                let losses = self.task.loss(&model, &batch, p)?;
                *sums.entry(format!("{prefix}loss")).or_default() +=
                    f64::from(losses.total.into_scalar::<f32>());
                for (name, term) in losses.terms {
                    *sums.entry(format!("{prefix}{name}")).or_default() +=
                        f64::from(term.into_scalar::<f32>());
                }
            }
        }
        let n = count.max(1) as f64;
        Ok(Some(sums.into_iter().map(|(k, v)| (k, v / n)).collect()))
    }

    fn save_checkpoint(
        &self,
        model: &T::Model,
        phases: &[Phase],
        optims: &[ModuleOptimizer],
        state: &TrainState,
    ) -> Result<PathBuf> {
        let pending = PendingCheckpoint::begin(&self.run_dir, state.step)?;
        let paths = &pending.paths;
        write_json(
            &paths.config(),
            &CheckpointConfig {
                voxspec_version: env!("CARGO_PKG_VERSION").to_string(),
                train: self.config.clone(),
                task: self.task.config(),
            },
        )?;
        write_json(&paths.state(), state)?;
        let ids: ParamIds = param_paths(model)
            .into_iter()
            .map(|(path, id, _)| (path, id.val()))
            .collect();
        write_json(&paths.param_ids(), &ids)?;
        let model_path = paths.model();
        let mut store = SafetensorsStore::from_file(&model_path).overwrite(true);
        model
            .save_into(&mut store)
            .map_err(|e| TrainError::Weights {
                path: model_path.clone(),
                message: e.to_string(),
            })?;
        crate::weights::canonicalize_header(&model_path)?;
        for (phase, optim) in phases.iter().zip(optims) {
            let path = paths.optimizer(&phase.name);
            optim.save(&path).map_err(|e| TrainError::Optimizer {
                path: path.clone(),
                message: e.to_string(),
            })?;
        }
        let dir = pending.commit(self.config.keep_checkpoints)?;
        tracing::info!(step = state.step, dir = %dir.display(), "checkpoint written");
        Ok(dir)
    }

    fn load_checkpoint(
        &self,
        dir: &Path,
        model: T::Model,
        phases: &[Phase],
        optims: &mut [ModuleOptimizer],
    ) -> Result<(T::Model, TrainState)> {
        let paths = CheckpointPaths::new(dir);
        let model_path = paths.model();
        let weights_error = |message: String| TrainError::Weights {
            path: model_path.clone(),
            message,
        };
        let model = load_weights(model, &model_path)?;
        let ids: ParamIds = read_json(&paths.param_ids())?;
        let (model, missing) = assign_ids(model, &ids);
        if !missing.is_empty() {
            return Err(weights_error(format!(
                "no saved parameter id for {}",
                missing.join(", ")
            )));
        }
        for (phase, optim) in phases.iter().zip(optims.iter_mut()) {
            let path = paths.optimizer(&phase.name);
            let loaded = optim
                .clone()
                .load(&path)
                .map_err(|e| TrainError::Optimizer {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            *optim = loaded;
        }
        let state: TrainState = read_json(&paths.state())?;
        if state.seed != self.config.seed {
            tracing::warn!(
                saved = state.seed,
                configured = self.config.seed,
                "resuming with a different seed: the run will not match an uninterrupted one"
            );
        }
        Ok((model, state))
    }
}

fn check_phases(phases: &[Phase]) -> Result<()> {
    if phases.is_empty() {
        return Err(TrainError::Phases {
            reason: "the task declares no phase".into(),
        });
    }
    for (i, phase) in phases.iter().enumerate() {
        if phases[..i].iter().any(|p| p.name == phase.name) {
            return Err(TrainError::Phases {
                reason: format!("duplicate phase name {:?}", phase.name),
            });
        }
    }
    Ok(())
}

/// Metric key prefix of a phase: none for a single-phase task.
fn phase_prefix(phases: &[Phase], phase: &Phase) -> String {
    if phases.len() > 1 {
        format!("{}/", phase.name)
    } else {
        String::new()
    }
}

/// Device seed of one loss evaluation (splitmix64 over the coordinates), so the RNG state is a
/// function of (seed, step) and resumes exactly.
/// Waits until `device` has run everything queued on it.
fn sync(device: &Device) -> Result<()> {
    device
        .sync()
        .map_err(|e| TrainError::task(format!("synchronising {device:?}: {e:?}")))
}

fn step_seed(seed: u64, step: usize, phase: usize, micro: usize) -> u64 {
    let mut z = seed
        ^ (step as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (phase as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ (micro as u64).wrapping_mul(0x1656_67B1_9E37_79F9);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `device` with autodiff on.
fn with_autodiff(device: &Device) -> Device {
    if device.is_autodiff() {
        device.clone()
    } else {
        device.clone().autodiff()
    }
}
