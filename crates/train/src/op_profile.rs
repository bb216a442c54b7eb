//! Where the throughput benchmark's forward and backward time goes, by operation family.
//!
//! Each family of the benchmark's model (the linear layers, attention, LayerNorm, GELU, the
//! residual adds, the loss, the token embedding) is run alone, at the shapes and in the number
//! one training step runs it, forward and then forward plus backward on the autodiff device,
//! with the device synchronised around each. The sum over families set against the step's
//! measured forward and backward time leaves what no family accounts for: layout copies
//! (splitting and merging heads), slicing, and autograd bookkeeping.
//!
//! Backward passes start from `sum(output · w)` for a fixed random `w`, so each family's
//! backward time includes one elementwise product and a sum over its output: small next to a
//! linear layer, comparable to the cheap elementwise families (residual adds).

use std::time::{Duration, Instant};

use burn::nn::{EmbeddingConfig, LayerNormConfig, LinearConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use serde::Serialize;
use voxspec_nn::activation::gelu;

use crate::ThroughputConfig;
use crate::error::{Result, TrainError};

/// One family's time in a training step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FamilyTime {
    /// What runs, e.g. `linear: MLP up (512 → 2048)`.
    pub family: String,
    /// Shape of one call's output.
    pub shape: Vec<usize>,
    /// Calls per training step.
    pub calls: usize,
    /// Forward time of all calls in a step, seconds (median over repetitions; the calls run
    /// back to back with one synchronisation at the end).
    pub forward_seconds: f64,
    /// Backward time of all calls in a step, seconds (forward + backward less forward).
    pub backward_seconds: f64,
}

/// Family times of one step of the benchmark's model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpProfile {
    /// Repetitions per family (after one untimed run); each time is their median.
    pub repeat: usize,
    /// The families, largest first.
    pub families: Vec<FamilyTime>,
}

impl OpProfile {
    /// Forward plus backward seconds of every family together.
    pub fn total_seconds(&self) -> f64 {
        self.families
            .iter()
            .map(|f| f.forward_seconds + f.backward_seconds)
            .sum()
    }
}

/// A family to time: its name, calls per step and a closure building its output from fresh
/// inputs (parameters and activations that require gradients).
struct Family<'a> {
    name: String,
    calls: usize,
    run: Box<dyn Fn() -> Tensor<3> + 'a>,
}

/// Times each operation family of `config`'s model on `device` (autodiff is switched on).
///
/// # Errors
/// [`TrainError::Config`] for zero repetitions or a width the heads do not divide;
/// [`TrainError::Task`] when the device cannot be synchronised.
pub fn profile_ops(config: &ThroughputConfig, device: &Device, repeat: usize) -> Result<OpProfile> {
    if repeat == 0 {
        return Err(TrainError::Config {
            field: "repeat",
            reason: "must be at least 1".into(),
        });
    }
    if config.heads == 0 || !config.d_model.is_multiple_of(config.heads) {
        return Err(TrainError::Config {
            field: "heads",
            reason: format!("must divide d_model {}", config.d_model),
        });
    }
    voxspec_nn::linear::set_matmul_precision(config.matmul).map_err(|e| TrainError::Config {
        field: "matmul",
        reason: e.to_string(),
    })?;
    let device = device.clone().autodiff();
    let (b, t, d, l, v) = (
        config.batch,
        config.seq_len,
        config.d_model,
        config.layers,
        config.vocab,
    );
    let h = config.heads;
    let act = |dims: [usize; 3]| -> Tensor<3> {
        Tensor::random(dims, Distribution::Normal(0.0, 1.0), &device).require_grad()
    };
    let mut families: Vec<Family> = Vec::new();
    for (what, d_in, d_out, calls) in [
        ("queries, keys, values", d, 3 * d, l),
        ("attention out", d, d, l),
        ("MLP up", d, 4 * d, l),
        ("MLP down", 4 * d, d, l),
        ("LM head", d, v, 1),
    ] {
        let linear = LinearConfig::new(d_in, d_out).init(&device);
        let x = act([b, t, d_in]);
        families.push(Family {
            name: format!("linear: {what} ({d_in} → {d_out})"),
            calls,
            run: Box::new(move || voxspec_nn::linear::linear(&linear, x.clone())),
        });
    }
    let (q, k, val) = (
        Tensor::<4>::random([b, h, t, d / h], Distribution::Normal(0.0, 1.0), &device)
            .require_grad(),
        Tensor::<4>::random([b, h, t, d / h], Distribution::Normal(0.0, 1.0), &device)
            .require_grad(),
        Tensor::<4>::random([b, h, t, d / h], Distribution::Normal(0.0, 1.0), &device)
            .require_grad(),
    );
    families.push(Family {
        name: format!("attention: causal softmax(QKᵀ)V, {h} heads"),
        calls: l,
        run: Box::new(move || {
            voxspec_nn::softmax::attention(q.clone(), k.clone(), val.clone(), None, true).reshape([
                b * h,
                t,
                d / h,
            ])
        }),
    });
    // As the model runs it: the transformer's norm (fused on the CPU backend).
    let norm = voxspec_nn::Norm::Layer(LayerNormConfig::new(d).with_epsilon(1e-5).init(&device));
    let x = act([b, t, d]);
    families.push(Family {
        name: "LayerNorm".into(),
        calls: 2 * l + 1,
        run: Box::new(move || norm.forward_with(x.clone(), Some(1e-5))),
    });
    let x = act([b, t, 4 * d]);
    families.push(Family {
        name: "GELU".into(),
        calls: l,
        run: Box::new(move || gelu(x.clone())),
    });
    let (x, y) = (act([b, t, d]), act([b, t, d]));
    families.push(Family {
        name: "residual add".into(),
        calls: 2 * l,
        run: Box::new(move || x.clone() + y.clone()),
    });
    let logits = act([b, t, v]);
    let targets = random_ids(b * t, v, &device).reshape([b, t, 1]);
    families.push(Family {
        name: "loss: log-softmax, gather, mean".into(),
        calls: 1,
        run: Box::new(move || {
            log_softmax(logits.clone(), 2)
                .gather(2, targets.clone())
                .mean()
                .neg()
                .reshape([1, 1, 1])
        }),
    });
    let embedding = EmbeddingConfig::new(v, d).init(&device);
    let ids = random_ids(b * t, v, &device).reshape([b, t]);
    let positions = EmbeddingConfig::new(t, d).init(&device);
    let position_ids = Tensor::<1, Int>::arange(0..t as i64, &device).reshape([1, t]);
    families.push(Family {
        name: "embedding: tokens + positions".into(),
        calls: 1,
        run: Box::new(move || {
            embedding.forward(ids.clone()) + positions.forward(position_ids.clone())
        }),
    });

    let mut times = Vec::with_capacity(families.len());
    for family in &families {
        let (forward, both) = time_family(family, repeat, &device)?;
        let forward = forward.as_secs_f64();
        let backward = (both.as_secs_f64() - forward).max(0.0);
        let shape = (family.run)().dims().to_vec();
        times.push(FamilyTime {
            family: family.name.clone(),
            shape,
            calls: family.calls,
            forward_seconds: forward,
            backward_seconds: backward,
        });
    }
    times.sort_by(|a, b| {
        (b.forward_seconds + b.backward_seconds)
            .total_cmp(&(a.forward_seconds + a.backward_seconds))
    });
    Ok(OpProfile {
        repeat,
        families: times,
    })
}

/// Median time of a step's calls of the family, forward alone and forward + backward: the
/// calls run back to back and the device is synchronised once after them, as in a step, so a
/// GPU's launch and synchronisation latency is not counted once per call.
fn time_family(family: &Family, repeat: usize, device: &Device) -> Result<(Duration, Duration)> {
    let sync = || {
        device
            .sync()
            .map_err(|e| TrainError::task(format!("synchronising {device:?}: {e:?}")))
    };
    // The backward pass starts from `sum(output · w)` with a fixed random `w`, so the gradient
    // reaching the family is a dense tensor, as in a step (the gradient of a plain sum is a
    // broadcast constant, which sends some kernels down slow strided paths).
    let dims = (family.run)().dims();
    let w = Tensor::<3>::random(dims, Distribution::Normal(0.0, 1.0), device);
    let mut forward = Vec::with_capacity(repeat);
    let mut both = Vec::with_capacity(repeat);
    // One untimed round of each (allocation, kernel compilation and autotuning on GPUs).
    for timed in std::iter::repeat_n(false, 1).chain(std::iter::repeat_n(true, repeat)) {
        sync()?;
        let start = Instant::now();
        // Kept alive until the device has computed them (fusion may defer the work).
        let outputs: Vec<Tensor<3>> = (0..family.calls).map(|_| (family.run)()).collect();
        sync()?;
        let forward_time = start.elapsed();
        drop(outputs);
        let start = Instant::now();
        for _ in 0..family.calls {
            drop(((family.run)() * w.clone()).sum().backward());
        }
        sync()?;
        if timed {
            forward.push(forward_time);
            both.push(start.elapsed());
        }
    }
    Ok((median(forward), median(both)))
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn random_ids(n: usize, vocab: usize, device: &Device) -> Tensor<1, Int> {
    let ids = crate::throughput::random_ids(0x9e37_79b9_7f4a_7c15, n, vocab);
    Tensor::from_data(TensorData::new(ids, [n]), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_timed_with_its_calls_per_step() {
        let config = ThroughputConfig {
            layers: 2,
            d_model: 16,
            heads: 2,
            vocab: 32,
            batch: 2,
            seq_len: 8,
            warmup: 1,
            steps: 1,
            matmul: voxspec_nn::linear::MatmulPrecision::F32,
        };
        let profile = profile_ops(&config, &Device::flex(), 2).unwrap();
        assert_eq!(profile.families.len(), 11);
        let calls = |prefix: &str| {
            profile
                .families
                .iter()
                .find(|f| f.family.starts_with(prefix))
                .map(|f| f.calls)
        };
        assert_eq!(calls("LayerNorm"), Some(5));
        assert_eq!(calls("linear: LM head"), Some(1));
        assert_eq!(calls("residual add"), Some(4));
        let head = profile
            .families
            .iter()
            .find(|f| f.family.starts_with("linear: LM head"))
            .unwrap();
        assert_eq!(head.shape, vec![2, 8, 32]);
        for f in &profile.families {
            assert!(
                f.forward_seconds > 0.0 && f.backward_seconds >= 0.0,
                "{f:?}"
            );
        }
        assert!(profile.total_seconds() > 0.0);
    }

    #[test]
    fn heads_that_do_not_divide_the_width_are_refused_by_name() {
        let config = ThroughputConfig {
            layers: 1,
            d_model: 10,
            heads: 3,
            vocab: 8,
            batch: 1,
            seq_len: 4,
            warmup: 0,
            steps: 1,
            matmul: voxspec_nn::linear::MatmulPrecision::F32,
        };
        match profile_ops(&config, &Device::flex(), 1) {
            Err(TrainError::Config { field, .. }) => assert_eq!(field, "heads"),
            other => panic!("{other:?}"),
        }
    }
}
