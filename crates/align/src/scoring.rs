//! How frames are scored against the states: the model's log-posteriors, optionally turned into
//! scaled log-likelihoods `log p(k | x) − λ · log q(k)` with the class prior `q` (the mean
//! posterior over frames), and with silence kept off loud frames ([`SilenceGate`]).
//!
//! **The silence gate.** Silence is the one class that can stand anywhere: an optional pause
//! between two words, or the required ones at the ends, can stretch over speech. Trained on the
//! likelihood summed over paths, a model learns exactly that — silence on nearly every frame and
//! each phone on a single one ("peaky" posteriors; measured on the bundled corpus, it squeezed
//! every phone into 10 ms). Frames within [`SilenceGate::below_peak_db`] of the utterance's
//! speech level (its 95th-percentile frame level) are loud: silence there costs
//! [`SilenceGate::penalty`] nats per frame. Quiet phones (closures, weak fricatives) are not
//! affected: only silence is penalised, and only where the audio is loud.

use burn::config::Config;

use crate::topology::SIL_CLASS;

/// Keeps silence off loud frames (see the module documentation).
#[derive(Config, Debug, PartialEq)]
pub struct SilenceGate {
    /// A frame is loud when its level is within this many dB of the utterance's speech level.
    #[config(default = 30.0)]
    pub below_peak_db: f32,
    /// Log-score subtracted from silence on a loud frame.
    #[config(default = 10.0)]
    pub penalty: f32,
}

impl SilenceGate {
    /// Which frames are loud, from their levels in dB.
    pub fn loud(&self, levels: &[f32]) -> Vec<bool> {
        if levels.is_empty() {
            return Vec::new();
        }
        let mut sorted = levels.to_vec();
        sorted.sort_by(f32::total_cmp);
        let speech = sorted[(sorted.len() - 1) * 95 / 100];
        levels
            .iter()
            .map(|&l| l > speech - self.below_peak_db)
            .collect()
    }

    /// Subtracts the penalty from silence on the loud frames of `scores` (`[frames, classes]`).
    pub fn apply(&self, scores: &mut [f32], levels: &[f32], classes: usize) {
        for (row, loud) in scores.chunks_exact_mut(classes).zip(self.loud(levels)) {
            if loud {
                row[SIL_CLASS as usize] -= self.penalty;
            }
        }
    }
}

/// How frames are scored and paths constrained: the prior's weight, the silence gate and the
/// shortest phone.
#[derive(Config, Debug, PartialEq)]
pub struct Scoring {
    /// Weight λ of the class prior (0: the posteriors themselves).
    #[config(default = 1.0)]
    pub prior_scale: f64,
    /// The silence gate (None: silence may stand anywhere).
    #[config(default = "Some(SilenceGate::new())")]
    pub silence_gate: Option<SilenceGate>,
    /// Frames every phone holds at least (silence excepted); `None` (and aligners saved
    /// before the field existed): [`DEFAULT_MIN_PHONE_FRAMES`].
    pub min_phone_frames: Option<usize>,
}

/// The shortest phone by default: 3 frames, 30 ms at the 10 ms hop, the minimum of a
/// three-state left-to-right phone HMM.
pub const DEFAULT_MIN_PHONE_FRAMES: usize = 3;

impl Scoring {
    /// Frames every phone holds at least (at least 1).
    pub fn min_phone_frames(&self) -> usize {
        self.min_phone_frames
            .unwrap_or(DEFAULT_MIN_PHONE_FRAMES)
            .max(1)
    }

    /// The frame scores of one utterance: `log_probs` (`[frames, classes]`) less the scaled
    /// prior, with the silence gate applied by the frames' `levels`.
    pub fn scores(&self, log_probs: &[f32], log_prior: &[f64], levels: &[f32]) -> Vec<f32> {
        let classes = log_prior.len();
        let mut out = scale(log_probs, log_prior, self.prior_scale);
        if let Some(gate) = &self.silence_gate {
            gate.apply(&mut out, levels, classes);
        }
        out
    }
}

/// Floor of the prior (a class never predicted would otherwise get an infinite bonus).
const PRIOR_FLOOR: f64 = 1e-5;

/// `log q(k)`: the mean over every frame of `exp(log_probs[t, k])`, floored, renormalised.
///
/// # Shapes
/// each of `utterances`: `[frames, classes]` row-major log-probabilities.
pub fn log_prior(utterances: &[&[f32]], classes: usize) -> Vec<f64> {
    let mut sum = vec![0.0f64; classes];
    let mut frames = 0usize;
    for utt in utterances {
        for row in utt.chunks_exact(classes) {
            for (s, &lp) in sum.iter_mut().zip(row) {
                *s += f64::from(lp).exp();
            }
            frames += 1;
        }
    }
    let n = frames.max(1) as f64;
    let q: Vec<f64> = sum.iter().map(|s| (s / n).max(PRIOR_FLOOR)).collect();
    let z: f64 = q.iter().sum();
    q.iter().map(|v| (v / z).ln()).collect()
}

/// `log_probs − scale · log_prior`, row by row.
pub fn scale(log_probs: &[f32], log_prior: &[f64], scale: f64) -> Vec<f32> {
    if scale == 0.0 {
        return log_probs.to_vec();
    }
    let classes = log_prior.len();
    let mut out = Vec::with_capacity(log_probs.len());
    for row in log_probs.chunks_exact(classes) {
        out.extend(
            row.iter()
                .zip(log_prior)
                .map(|(&lp, &q)| (f64::from(lp) - scale * q) as f32),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_penalises_silence_on_loud_frames_only() {
        let gate = SilenceGate::new();
        // 20 speech frames at 60 dB, 5 quiet ones at 20 dB
        let levels: Vec<f32> = (0..25).map(|t| if t < 20 { 60.0 } else { 20.0 }).collect();
        let loud = gate.loud(&levels);
        assert!(loud[..20].iter().all(|&l| l) && loud[20..].iter().all(|&l| !l));
        let mut scores = vec![0.0f32; 25 * 3];
        gate.apply(&mut scores, &levels, 3);
        assert_eq!(scores[0], -10.0);
        assert_eq!(scores[1], 0.0);
        assert_eq!(scores[20 * 3], 0.0);
    }

    #[test]
    fn prior_is_the_mean_posterior_and_scaling_subtracts_it() {
        let a = [0.5f32.ln(), 0.5f32.ln(), 1.0f32.ln(), 1e-30f32.ln()];
        let lp = log_prior(&[&a], 2);
        assert!((lp[0].exp() - 0.75).abs() < 1e-6);
        assert!((lp[1].exp() - 0.25).abs() < 1e-6);
        let s = scale(&a[..2], &lp, 1.0);
        assert!((f64::from(s[0]) - (0.5f64 / 0.75).ln()).abs() < 1e-6);
        assert_eq!(scale(&a, &lp, 0.0), a.to_vec());
    }
}
