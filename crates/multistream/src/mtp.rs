//! Multi-token prediction for the multi-stream LM (Nguyen et al. 2025 on a delayed grid):
//! extra heads that read the hidden state of step `s` and predict the columns after the next.
//!
//! ```text
//! head 0 (the LM's heads):  step s → column s + 1, one linear per stream
//! head i ≥ 1 (Medusa):      step s → column s + 1 + i:  out_ij(x + SiLU(W_i x)), one out_ij per
//!                           stream j, W_i zero-initialised (each head starts as a plain
//!                           linear read-out of the hidden state)
//! loss:                     streams + Σ_i weight^i · ahead_i, ahead_i the per-stream
//!                           cross-entropy of head i on the targets of head 0 shifted i steps
//!                           (positions whose shifted target leaves the row carry none)
//! ```
//!
//! Decoding: `voxspec_infer::FrameMtpDecoder` (independent draws or per-stream Viterbi) reads
//! the heads through [`crate::MsFrameLm`]'s `head_logits`.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use voxspec_nn::activation::silu;
use voxspec_nn::linear::linear;

/// The extra heads of a multi-stream LM.
#[derive(Config, Debug, PartialEq)]
pub struct MsMtpConfig {
    /// Heads in all, the LM's own included (`n ≥ 2`): head `i` predicts the column `i + 1`
    /// steps ahead.
    pub heads: usize,
    /// Loss weight decay: head `i`'s cross-entropy counts `weight^i` (Medusa-2 uses 0.8).
    #[config(default = 0.8)]
    pub weight: f32,
}

impl MsMtpConfig {
    /// Checks `heads ≥ 2` and a finite positive weight.
    ///
    /// # Errors
    /// The field at fault, in words.
    pub fn validate(&self) -> Result<(), String> {
        if self.heads < 2 {
            return Err(format!(
                "mtp.heads must be at least 2 (the LM's head and one more), not {}",
                self.heads
            ));
        }
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return Err(format!(
                "mtp.weight must be positive and finite, not {}",
                self.weight
            ));
        }
        Ok(())
    }

    /// The loss weight of extra head `i ≥ 1`.
    pub fn head_weight(&self, i: usize) -> f32 {
        self.weight.powi(i32::try_from(i).unwrap_or(i32::MAX))
    }
}

/// One extra head: a zero-initialised residual block shared by the streams, then one output
/// layer per stream.
#[derive(Module, Debug)]
pub struct MsMtpHead {
    /// `d_model → d_model`, zero-initialised.
    pub residual: Linear,
    /// Per stream: `d_model → codebook_size + 1`.
    pub outs: Vec<Linear>,
}

impl MsMtpHead {
    /// A fresh head for `streams` streams of `classes` classes over width `d`.
    pub fn init(d: usize, streams: usize, classes: usize, device: &Device) -> Self {
        let mut residual = LinearConfig::new(d, d).init(device);
        // Medusa: the residual branch starts at zero, so x + SiLU(0·x + 0) = x.
        residual.weight = Param::from_tensor(Tensor::zeros([d, d], device));
        Self {
            residual,
            outs: (0..streams)
                .map(|_| LinearConfig::new(d, classes).init(device))
                .collect(),
        }
    }

    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `[batch, time, streams, codebook_size + 1]`
    pub fn forward(&self, hidden: Tensor<3>) -> Tensor<4> {
        let x = hidden.clone() + silu(linear(&self.residual, hidden));
        Tensor::stack(self.outs.iter().map(|o| linear(o, x.clone())).collect(), 2)
    }
}

/// Targets and weights of head `i` from head 0's: position `t` takes those of `t + i` when
/// position `t` itself is a scored speech step of the same row (`scored[b][t]`), else none.
///
/// # Shapes
/// - `targets`, `weights`: `[batch, time, streams]` flattened row-major
/// - output: the same shapes
pub fn shift_targets(
    targets: &[i64],
    weights: &[f32],
    scored: &[bool],
    [batch, time, k]: [usize; 3],
    i: usize,
) -> (Vec<i64>, Vec<f32>) {
    let mut out_t = vec![0i64; batch * time * k];
    let mut out_w = vec![0f32; batch * time * k];
    for b in 0..batch {
        for t in 0..time.saturating_sub(i) {
            if !scored[b * time + t] {
                continue;
            }
            let (to, from) = ((b * time + t) * k, (b * time + t + i) * k);
            out_t[to..to + k].copy_from_slice(&targets[from..from + k]);
            out_w[to..to + k].copy_from_slice(&weights[from..from + k]);
        }
    }
    (out_t, out_w)
}

/// The freeze list (parameter-path regexes) that trains only the extra heads of a model made by
/// [`with_fresh_heads`]: the base LM's weights stay as they are (Medusa-1), so its own
/// next-step predictions do not change.
pub fn base_freeze_patterns() -> Vec<String> {
    [
        r"^text_embedding\.",
        r"^stream_embeddings\.",
        r"^segment_embedding\.",
        r"^voice_projection\.",
        r"^track\.",
        r"^duration\.",
        r"^transformer\.",
        r"^heads\.",
    ]
    .map(String::from)
    .into()
}

/// `base` with `heads − 1` fresh extra heads for `config` (the base's config with `mtp` set),
/// every parameter untracked like loaded weights: the training loop's freeze list
/// ([`base_freeze_patterns`]) decides what trains.
pub fn with_fresh_heads(
    base: crate::MultiStreamModel,
    config: &crate::MultiStreamConfig,
    heads: usize,
    device: &Device,
) -> crate::MultiStreamModel {
    crate::MultiStreamModel {
        ahead: (1..heads)
            .map(|_| {
                MsMtpHead::init(
                    config.transformer.d_model,
                    config.streams,
                    config.output_vocab(),
                    device,
                )
                .no_grad()
            })
            .collect(),
        ..base.no_grad()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_targets_stay_in_their_row_and_on_scored_steps() {
        // batch 2, time 4, k 1: row 0 scored at t 1..4, row 1 at t 0..2
        let targets = vec![0, 10, 11, 12, 20, 21, 0, 0];
        let weights = vec![0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0];
        let scored = vec![false, true, true, true, true, true, false, false];
        let (t, w) = shift_targets(&targets, &weights, &scored, [2, 4, 1], 1);
        assert_eq!(t, vec![0, 11, 12, 0, 21, 0, 0, 0]);
        assert_eq!(w, vec![0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]);
        let (t0, w0) = shift_targets(&targets, &weights, &scored, [2, 4, 1], 0);
        assert_eq!((t0, w0), (targets, weights));
    }

    #[test]
    fn config_checks_and_weights() {
        assert!(MsMtpConfig::new(1).validate().is_err());
        assert!(MsMtpConfig::new(3).with_weight(0.0).validate().is_err());
        let c = MsMtpConfig::new(4);
        assert!(c.validate().is_ok());
        assert!((c.head_weight(2) - 0.64).abs() < 1e-6);
    }
}
