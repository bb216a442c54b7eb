//! Training configuration: optimizer, learning-rate schedule, accumulation, clipping, cadences.
//!
//! Plain serde structs (not `#[derive(Config)]`) because the per-phase optimizer map and the
//! tagged schedule enum read best as JSON this way; every field has a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use voxspec_nn::linear::MatmulPrecision;

use crate::error::{Result, TrainError};

/// Learning-rate decay after the linear warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LrSchedule {
    /// Keep the peak learning rate.
    Constant,
    /// Cosine from the peak to `min_lr` over `decay_steps` steps after warm-up, then `min_lr`.
    Cosine { decay_steps: usize, min_lr: f64 },
    /// `peak * sqrt(warmup / (step + 1))` after warm-up (the Transformer schedule).
    InverseSqrt,
}

/// AdamW with a warm-up + decay schedule and optional global-norm clipping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OptimConfig {
    /// Peak learning rate.
    pub lr: f64,
    /// Steps of linear warm-up from `lr / warmup_steps` to `lr`.
    pub warmup_steps: usize,
    /// Decay after warm-up.
    pub schedule: LrSchedule,
    /// AdamW β1.
    pub beta_1: f32,
    /// AdamW β2.
    pub beta_2: f32,
    /// AdamW ε.
    pub epsilon: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// Clip the global gradient norm (over all tensors of the phase) to this value.
    pub clip_grad_norm: Option<f64>,
}

impl Default for OptimConfig {
    fn default() -> Self {
        Self {
            lr: 3e-4,
            warmup_steps: 0,
            schedule: LrSchedule::Constant,
            beta_1: 0.9,
            beta_2: 0.999,
            epsilon: 1e-8,
            weight_decay: 0.01,
            clip_grad_norm: Some(1.0),
        }
    }
}

impl OptimConfig {
    /// Learning rate of the update with 0-based index `step`.
    pub fn lr_at(&self, step: usize) -> f64 {
        let warmup = self.warmup_steps;
        if step < warmup {
            return self.lr * (step + 1) as f64 / warmup as f64;
        }
        match &self.schedule {
            LrSchedule::Constant => self.lr,
            LrSchedule::Cosine {
                decay_steps,
                min_lr,
            } => {
                let progress = ((step - warmup) as f64 / (*decay_steps).max(1) as f64).min(1.0);
                min_lr + 0.5 * (self.lr - min_lr) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            LrSchedule::InverseSqrt => self.lr * (warmup.max(1) as f64 / (step + 1) as f64).sqrt(),
        }
    }

    /// The Burn optimizer for this config (clipping is done by the loop, globally).
    pub(crate) fn init(&self) -> burn::optim::ModuleOptimizer {
        burn::optim::AdamWConfig::new()
            .with_beta_1(self.beta_1)
            .with_beta_2(self.beta_2)
            .with_epsilon(self.epsilon)
            .with_weight_decay(self.weight_decay)
            .init()
    }

    fn validate(&self, field: &'static str) -> Result<()> {
        let bad = |reason: String| Err(TrainError::Config { field, reason });
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad(format!("lr must be positive, got {}", self.lr));
        }
        if let Some(c) = self.clip_grad_norm
            && !(c.is_finite() && c > 0.0)
        {
            return bad(format!("clip_grad_norm must be positive, got {c}"));
        }
        if let LrSchedule::Cosine { min_lr, .. } = self.schedule
            && !(0.0..=self.lr).contains(&min_lr)
        {
            return bad(format!("cosine min_lr {min_lr} must lie in [0, lr]"));
        }
        Ok(())
    }
}

/// The whole training run; saved as `config.json` in every checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// Seeds model init and the per-step device RNG.
    pub seed: u64,
    /// Optimizer updates to run in total (a resumed run counts from its checkpoint).
    pub max_steps: usize,
    /// Micro-batches whose gradients are averaged into one update.
    pub grad_accum: usize,
    /// Optimizer of every phase without an entry in `phase_optimizers`.
    pub optimizer: OptimConfig,
    /// Per-phase optimizer overrides, by phase name.
    pub phase_optimizers: BTreeMap<String, OptimConfig>,
    /// Regexes over parameter paths (`layer.weight`) that are frozen: no gradient, no state.
    pub freeze: Vec<String>,
    /// Write metrics every this many steps.
    pub log_every: usize,
    /// Validate every this many steps (0: never).
    pub valid_every: usize,
    /// Use at most this many validation batches (None: all).
    pub valid_max_batches: Option<usize>,
    /// Checkpoint every this many steps (0: only at the end and on stop).
    pub checkpoint_every: usize,
    /// Number of checkpoints kept on disk.
    pub keep_checkpoints: usize,
    /// Abort after this many consecutive non-finite steps.
    pub max_consecutive_nonfinite: usize,
    /// Also write TensorBoard event files next to `metrics.jsonl`.
    pub tensorboard: bool,
    /// Time each step's phases (data, forward, backward, optimizer) and report them as
    /// `time_data`, `time_forward`, `time_backward`, `time_optimizer` (seconds). The device is
    /// synchronised at each phase boundary, so on a GPU the times are the work's, not the
    /// launches'; that costs a little throughput, so it is off unless asked for.
    pub time_phases: bool,
    /// The precision of the linear layers' products ([`voxspec_nn::linear`]): f32, or bf16
    /// operands with f32 sums on CPUs with AMX-BF16 or AVX512-BF16 (mixed precision; weights,
    /// gradients and optimizer state stay f32).
    pub matmul: MatmulPrecision,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            max_steps: 1000,
            grad_accum: 1,
            optimizer: OptimConfig::default(),
            phase_optimizers: BTreeMap::new(),
            freeze: Vec::new(),
            log_every: 10,
            valid_every: 0,
            valid_max_batches: None,
            checkpoint_every: 500,
            keep_checkpoints: 3,
            max_consecutive_nonfinite: 10,
            tensorboard: true,
            time_phases: false,
            matmul: MatmulPrecision::F32,
        }
    }
}

impl TrainConfig {
    /// The optimizer config of phase `name`.
    pub fn optimizer_for(&self, name: &str) -> &OptimConfig {
        self.phase_optimizers.get(name).unwrap_or(&self.optimizer)
    }

    /// Checks ranges; called by [`crate::Trainer::run`].
    pub fn validate(&self) -> Result<()> {
        let positive = |field: &'static str, value: usize| {
            if value == 0 {
                Err(TrainError::Config {
                    field,
                    reason: "must be at least 1".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("grad_accum", self.grad_accum)?;
        positive("log_every", self.log_every)?;
        positive("keep_checkpoints", self.keep_checkpoints)?;
        positive("max_consecutive_nonfinite", self.max_consecutive_nonfinite)?;
        self.optimizer.validate("optimizer")?;
        for optim in self.phase_optimizers.values() {
            optim.validate("phase_optimizers")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warmup_then_cosine_reaches_min() {
        let c = OptimConfig {
            lr: 1.0,
            warmup_steps: 4,
            schedule: LrSchedule::Cosine {
                decay_steps: 10,
                min_lr: 0.1,
            },
            ..OptimConfig::default()
        };
        assert_eq!(c.lr_at(0), 0.25);
        assert_eq!(c.lr_at(3), 1.0);
        assert_eq!(c.lr_at(4), 1.0);
        assert!((c.lr_at(9) - 0.55).abs() < 1e-12);
        assert!((c.lr_at(14) - 0.1).abs() < 1e-12);
        assert!((c.lr_at(100) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn inverse_sqrt_decays_from_peak() {
        let c = OptimConfig {
            lr: 2.0,
            warmup_steps: 4,
            schedule: LrSchedule::InverseSqrt,
            ..OptimConfig::default()
        };
        assert_eq!(c.lr_at(1), 1.0);
        assert_eq!(c.lr_at(3), 2.0);
        assert!((c.lr_at(15) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn config_roundtrips_and_validates() {
        let mut c = TrainConfig::default();
        c.phase_optimizers.insert(
            "disc".into(),
            OptimConfig {
                schedule: LrSchedule::InverseSqrt,
                ..OptimConfig::default()
            },
        );
        let json = serde_json::to_string(&c).expect("serialize");
        let back: TrainConfig = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, c);
        assert!(c.validate().is_ok());
        c.grad_accum = 0;
        assert!(c.validate().is_err());
    }
}
