//! Training throughput of the shared loop: a GPT-2-like causal LM (learned positions, LayerNorm,
//! GELU MLP, biases) over random tokens, trained by [`Trainer`] with everything a real run does
//! except checkpoints (AdamW, global-norm clipping, the NaN guard), timed after warm-up steps.
//! The same config in PyTorch is `tools/bench_train_peer.py`, so the two can be run side by side.

use std::path::Path;
use std::time::{Duration, Instant};

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use serde::Serialize;
use voxspec_nn::linear::{MatmulPrecision, linear};
use voxspec_nn::{MlpKind, NormKind, PositionKind, Transformer, TransformerConfig};

use crate::{
    BatchSource, Losses, OptimConfig, Result, StepReport, TrainConfig, TrainError, TrainObserver,
    TrainTask, Trainer,
};

/// The benchmark's model and batch shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputConfig {
    /// Transformer layers.
    pub layers: usize,
    /// Model width (the MLP is 4× wider).
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence.
    pub seq_len: usize,
    /// Steps not timed (allocation, kernel selection).
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
    /// Precision of the linear layers' products ([`TrainConfig::matmul`]).
    pub matmul: MatmulPrecision,
}

/// What the benchmark measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Throughput {
    /// Parameters of the model.
    pub parameters: usize,
    /// Predicted tokens per step (batch × sequence length).
    pub tokens_per_step: usize,
    /// Steps timed.
    pub timed_steps: usize,
    /// Median wall time of a timed step, seconds.
    pub median_step_seconds: f64,
    /// `tokens_per_step / median_step_seconds`.
    pub tokens_per_second: f64,
    /// Median seconds of each phase of a timed step, when phases were timed.
    pub phases: Option<PhaseTimes>,
}

/// Median seconds of each phase of a step ([`crate::TrainConfig::time_phases`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseTimes {
    /// Building the batch on the device.
    pub data: f64,
    /// The loss, read back.
    pub forward: f64,
    /// Backward pass and gradient collection.
    pub backward: f64,
    /// Gradient norm, clipping and the AdamW update.
    pub optimizer: f64,
}

/// A GPT-2-style causal LM: embedding, the shared transformer core, a linear head.
#[derive(Module, Debug)]
struct CausalLm {
    embedding: Embedding,
    core: Transformer,
    head: Linear,
}

/// Batches of `[batch, seq_len + 1]` random tokens.
struct RandomTokens {
    batch: usize,
    seq_len: usize,
    vocab: usize,
}

impl BatchSource<Tensor<2, Int>> for RandomTokens {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        1_000_000
    }

    fn batch(&self, epoch: usize, index: usize, device: &Device) -> Result<Tensor<2, Int>> {
        // Keyed by (epoch, index): reproducible, no RNG state to carry.
        let seed = (epoch as u64) << 32 | index as u64;
        let ids = random_ids(seed, self.batch * (self.seq_len + 1), self.vocab);
        Ok(Tensor::from_data(
            TensorData::new(ids, [self.batch, self.seq_len + 1]),
            device,
        ))
    }
}

/// `n` token ids below `vocab` from a fixed LCG started at `seed`.
pub(crate) fn random_ids(seed: u64, n: usize, vocab: usize) -> Vec<i64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % vocab as u64) as i64
        })
        .collect()
}

struct LmTask {
    core: TransformerConfig,
    vocab: usize,
    data: RandomTokens,
}

impl TrainTask for LmTask {
    type Model = CausalLm;
    type Batch = Tensor<2, Int>;

    fn init_model(&self, device: &Device) -> Result<CausalLm> {
        Ok(CausalLm {
            embedding: EmbeddingConfig::new(self.vocab, self.core.d_model).init(device),
            core: self.core.init(device).map_err(TrainError::task)?,
            head: LinearConfig::new(self.core.d_model, self.vocab).init(device),
        })
    }

    fn train_data(&self) -> &dyn BatchSource<Tensor<2, Int>> {
        &self.data
    }

    fn batch_items(&self, batch: &Tensor<2, Int>) -> usize {
        let [b, t] = batch.dims();
        b * (t - 1)
    }

    fn loss(&self, model: &CausalLm, batch: &Tensor<2, Int>, _phase: usize) -> Result<Losses> {
        let [b, t] = batch.dims();
        let inputs = batch.clone().narrow(1, 0, t - 1);
        let targets = batch.clone().narrow(1, 1, t - 1).reshape([b, t - 1, 1]);
        let hidden = model
            .core
            .forward(model.embedding.forward(inputs), None)
            .map_err(TrainError::task)?;
        // [b, t-1, vocab] → mean negative log-likelihood of the next tokens
        let logp = log_softmax(linear(&model.head, hidden), 2).gather(2, targets);
        Ok(Losses::total(logp.mean().neg()))
    }
}

/// Times every step after the warm-up.
struct StepTimer {
    warmup: usize,
    last: Instant,
    timed: Vec<Duration>,
    /// Per timed step: data, forward, backward, optimizer seconds.
    phases: Vec<[f64; 4]>,
}

impl TrainObserver for StepTimer {
    fn on_step(&mut self, report: &StepReport) {
        let now = Instant::now();
        if report.step > self.warmup {
            self.timed.push(now - self.last);
            let phase = |key: &str| report.values.get(key).copied();
            if let (Some(a), Some(b), Some(c), Some(d)) = (
                phase("time_data"),
                phase("time_forward"),
                phase("time_backward"),
                phase("time_optimizer"),
            ) {
                self.phases.push([a, b, c, d]);
            }
        }
        self.last = now;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

impl ThroughputConfig {
    /// The transformer core: GPT-2's choices (LayerNorm, learned positions, GELU, biases), no
    /// dropout.
    pub fn core(&self) -> TransformerConfig {
        TransformerConfig::new()
            .with_d_model(self.d_model)
            .with_n_heads(self.heads)
            .with_n_layers(self.layers)
            .with_d_ff(4 * self.d_model)
            .with_norm(NormKind::Layer)
            .with_positions(PositionKind::Learned)
            .with_mlp(MlpKind::Gelu)
            .with_bias(true)
            .with_dropout(0.0)
            .with_max_seq_len(self.seq_len)
    }

    /// Parameters of the model this config builds.
    ///
    /// # Errors
    /// [`TrainError::Task`] for a core config that cannot build a model.
    pub fn parameters(&self, device: &Device) -> Result<usize> {
        Ok(self.task().init_model(device)?.num_params())
    }

    fn task(&self) -> LmTask {
        LmTask {
            core: self.core(),
            vocab: self.vocab,
            data: RandomTokens {
                batch: self.batch,
                seq_len: self.seq_len,
                vocab: self.vocab,
            },
        }
    }

    /// Trains `warmup + steps` steps on `device` (the loop's files go to the scratch directory
    /// `run_dir`) and returns the throughput of the timed steps.
    ///
    /// # Errors
    /// [`TrainError::Config`] for zero steps or a sequence shorter than 2 tokens; the loop's
    /// errors.
    pub fn measure(&self, device: &Device, run_dir: &Path) -> Result<Throughput> {
        self.measure_with(device, run_dir, false)
    }

    /// [`ThroughputConfig::measure`], with each step's phases timed when `time_phases` (the
    /// device is then synchronised between phases, which costs a little throughput).
    ///
    /// # Errors
    /// As [`ThroughputConfig::measure`].
    pub fn measure_with(
        &self,
        device: &Device,
        run_dir: &Path,
        time_phases: bool,
    ) -> Result<Throughput> {
        if self.steps == 0 {
            return Err(TrainError::Config {
                field: "steps",
                reason: "must be at least 1".into(),
            });
        }
        if self.seq_len < 2 {
            return Err(TrainError::Config {
                field: "seq_len",
                reason: "must be at least 2".into(),
            });
        }
        let task = self.task();
        let parameters = task.init_model(device)?.num_params();
        let config = TrainConfig {
            max_steps: self.warmup + self.steps,
            optimizer: OptimConfig {
                lr: 3e-4,
                warmup_steps: 0,
                ..OptimConfig::default()
            },
            log_every: 1_000_000,
            checkpoint_every: 0,
            tensorboard: false,
            time_phases,
            matmul: self.matmul,
            ..TrainConfig::default()
        };
        let mut timer = StepTimer {
            warmup: self.warmup,
            last: Instant::now(),
            timed: Vec::new(),
            phases: Vec::new(),
        };
        Trainer::new(config, task, run_dir, device).run(&mut timer)?;
        let steps: Vec<f64> = timer.timed.iter().map(Duration::as_secs_f64).collect();
        let timed_steps = steps.len();
        let step = median(steps);
        let phase = |i: usize| median(timer.phases.iter().map(|p| p[i]).collect());
        let phases = (!timer.phases.is_empty()).then(|| PhaseTimes {
            data: phase(0),
            forward: phase(1),
            backward: phase(2),
            optimizer: phase(3),
        });
        let tokens = self.batch * self.seq_len;
        Ok(Throughput {
            parameters,
            tokens_per_step: tokens,
            timed_steps,
            median_step_seconds: step,
            tokens_per_second: tokens as f64 / step,
            phases,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> ThroughputConfig {
        ThroughputConfig {
            layers: 1,
            d_model: 16,
            heads: 2,
            vocab: 32,
            batch: 2,
            seq_len: 8,
            warmup: 1,
            steps: 3,
            matmul: MatmulPrecision::F32,
        }
    }

    #[test]
    fn every_step_after_the_warm_up_is_timed() {
        let dir = tempfile::tempdir().unwrap();
        let t = tiny().measure(&Device::flex(), dir.path()).unwrap();
        assert_eq!(t.timed_steps, 3);
        assert_eq!(t.tokens_per_step, 16);
        assert!(t.tokens_per_second > 0.0 && t.tokens_per_second.is_finite());
        assert_eq!(t.parameters, tiny().parameters(&Device::flex()).unwrap());
        assert_eq!(t.phases, None);
    }

    #[test]
    fn timed_phases_fit_inside_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let t = tiny()
            .measure_with(&Device::flex(), dir.path(), true)
            .unwrap();
        let p = t.phases.expect("phases were timed");
        for (name, secs) in [
            ("data", p.data),
            ("forward", p.forward),
            ("backward", p.backward),
            ("optimizer", p.optimizer),
        ] {
            assert!(secs > 0.0 && secs.is_finite(), "{name}: {secs}");
        }
        // Medians of parts need not sum below the median step, but not far above it.
        let parts = p.data + p.forward + p.backward + p.optimizer;
        assert!(
            parts < 2.0 * t.median_step_seconds,
            "{parts} vs {}",
            t.median_step_seconds
        );
    }

    #[test]
    fn zero_steps_and_one_token_sequences_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for (spoil, field) in [
            (ThroughputConfig { steps: 0, ..tiny() }, "steps"),
            (
                ThroughputConfig {
                    seq_len: 1,
                    ..tiny()
                },
                "seq_len",
            ),
        ] {
            match spoil.measure(&Device::flex(), dir.path()) {
                Err(TrainError::Config { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }
}
