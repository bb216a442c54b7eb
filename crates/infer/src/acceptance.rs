//! Offline acceptance: how often a draft would be accepted, from teacher-forced target and draft
//! distributions on given sequences, without decoding.
//!
//! At a position with draft law `p` and target law `q` a rule keeps the draft with probability
//! `α = Σ_x p(x) · P(keep x)` ([`acceptance_probability`]; `1 − TV(p, q)` for exact
//! verification). With the mean `α` over positions, a step drafting `γ` tokens emits on average
//! `(1 − α^(γ+1)) / (1 − α)` tokens (Leviathan et al. 2023, treating positions as independent),
//! and the speedup over AR is that divided by `γ·c + 1` for a draft costing `c` target forwards.
//!
//! [`teacher_forced`] scores sequences with both models (one prefill and one extend each) and
//! feeds every position's pair of distributions, warped by the same [`SamplerConfig`] a decoder
//! would use, to an [`OfflineAcceptance`].

use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, LogitsRequest};
use crate::sampler::SamplerConfig;
use crate::verify::{AcceptanceRule, acceptance_probability};

/// Expected tokens emitted per target forward with per-position acceptance `alpha` and `gamma`
/// drafts: `(1 − α^(γ+1)) / (1 − α)` (`γ + 1` when `α = 1`).
pub fn expected_tokens_per_step(alpha: f64, gamma: usize) -> f64 {
    let alpha = alpha.clamp(0.0, 1.0);
    if alpha >= 1.0 - 1e-12 {
        (gamma + 1) as f64
    } else {
        (1.0 - alpha.powi(gamma as i32 + 1)) / (1.0 - alpha)
    }
}

/// Accumulates per-position acceptance probabilities under one rule.
#[derive(Debug, Clone)]
pub struct OfflineAcceptance {
    rule: AcceptanceRule,
    sum: f64,
    sum_sq: f64,
    positions: usize,
}

impl OfflineAcceptance {
    /// An empty accumulator for `rule`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] from [`AcceptanceRule::validate`].
    pub fn new(rule: AcceptanceRule) -> Result<Self> {
        rule.validate(None)?;
        Ok(Self {
            rule,
            sum: 0.0,
            sum_sq: 0.0,
            positions: 0,
        })
    }

    /// The rule.
    pub fn rule(&self) -> &AcceptanceRule {
        &self.rule
    }

    /// Adds one position's draft and target distributions; returns its `α`.
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] when the lengths differ.
    pub fn add(&mut self, draft: &[f32], target: &[f32]) -> Result<f64> {
        let alpha = acceptance_probability(&self.rule, draft, target)?;
        self.sum += alpha;
        self.sum_sq += alpha * alpha;
        self.positions += 1;
        Ok(alpha)
    }

    /// Positions added.
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Mean `α` over the positions (`None` before the first).
    pub fn mean_alpha(&self) -> Option<f64> {
        (self.positions > 0).then(|| self.sum / self.positions as f64)
    }

    /// Standard deviation of the per-position `α`.
    pub fn std_alpha(&self) -> Option<f64> {
        self.mean_alpha().map(|m| {
            (self.sum_sq / self.positions as f64 - m * m)
                .max(0.0)
                .sqrt()
        })
    }

    /// [`expected_tokens_per_step`] at the mean `α`.
    pub fn expected_tokens_per_step(&self, gamma: usize) -> Option<f64> {
        self.mean_alpha()
            .map(|a| expected_tokens_per_step(a, gamma))
    }

    /// Expected speedup over AR for a draft costing `draft_cost` target forwards per token:
    /// tokens per step over `γ · c + 1`.
    pub fn expected_speedup(&self, gamma: usize, draft_cost: f64) -> Option<f64> {
        self.expected_tokens_per_step(gamma)
            .map(|t| t / (gamma as f64 * draft_cost + 1.0))
    }
}

/// One teacher-forced sequence: the prompt and the tokens that follow it.
#[derive(Debug, Clone)]
pub struct ForcedSequence<P> {
    /// What both models are conditioned on.
    pub prompt: P,
    /// The continuation scored position by position (at least one token).
    pub tokens: Vec<u32>,
}

/// Scores `sequences` with `target` and `draft` (teacher forcing: one prefill and one extend
/// per model and sequence) and adds every position to `acc`. Both distributions at position
/// `t` come from `sampler.distribution(logits, tokens[..t], None)`.
///
/// # Errors
/// [`InferError::ModelMismatch`] for different vocabularies, [`InferError::InvalidRequest`]
/// for an empty continuation, and model errors.
pub fn teacher_forced<M, D>(
    target: &M,
    draft: &D,
    sequences: &[ForcedSequence<M::Prompt>],
    sampler: &SamplerConfig,
    acc: &mut OfflineAcceptance,
) -> Result<()>
where
    M: LanguageModel,
    D: LanguageModel<Prompt = M::Prompt>,
{
    if target.vocab_size() != draft.vocab_size() {
        return Err(InferError::ModelMismatch {
            what: "vocabulary size",
            target: target.vocab_size().to_string(),
            draft: draft.vocab_size().to_string(),
        });
    }
    sampler.validate()?;
    acc.rule.validate(Some(target.vocab_size()))?;
    for (i, seq) in sequences.iter().enumerate() {
        if seq.tokens.is_empty() {
            return Err(InferError::InvalidRequest {
                detail: format!("teacher-forced sequence {i} has no tokens"),
            });
        }
        let rows_t = forced_rows(target, &seq.prompt, &seq.tokens)?;
        let rows_d = forced_rows(draft, &seq.prompt, &seq.tokens)?;
        for (t, (q, p)) in rows_t.iter().zip(&rows_d).enumerate() {
            let history = &seq.tokens[..t];
            let q = sampler.distribution(q, history, None);
            let p = sampler.distribution(p, history, None);
            acc.add(&p, &q)?;
        }
    }
    Ok(())
}

/// Head-0 logits before each token of `tokens`: the prefill's row, then the extend's rows for
/// all but the last token.
fn forced_rows<M: LanguageModel>(
    model: &M,
    prompt: &M::Prompt,
    tokens: &[u32],
) -> Result<Vec<Vec<f32>>> {
    let capacity = model.prompt_len(prompt) + tokens.len();
    let mut cache = model.new_cache(1, capacity)?;
    let first = model.prefill(
        &mut cache,
        std::slice::from_ref(prompt),
        LogitsRequest::heads_at_last(1),
    )?;
    let mut rows = vec![first.row(0, 0, 0).to_vec()];
    if tokens.len() > 1 {
        let block = vec![tokens[..tokens.len() - 1].to_vec()];
        let logits = model.extend(&mut cache, &block, LogitsRequest::next_token())?;
        for pos in 0..tokens.len() - 1 {
            rows.push(logits.row(0, pos, 0).to_vec());
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_per_step_formula() {
        assert!((expected_tokens_per_step(0.0, 4) - 1.0).abs() < 1e-12);
        assert!((expected_tokens_per_step(1.0, 4) - 5.0).abs() < 1e-12);
        // α = 0.5, γ = 2: 1 + 0.5 + 0.25
        assert!((expected_tokens_per_step(0.5, 2) - 1.75).abs() < 1e-12);
    }

    #[test]
    fn accumulator_averages_positions() {
        let mut acc = OfflineAcceptance::new(AcceptanceRule::Exact).unwrap();
        assert_eq!(acc.mean_alpha(), None);
        // α = 1 − TV: 1.0 and 0.6
        acc.add(&[0.5, 0.5], &[0.5, 0.5]).unwrap();
        acc.add(&[0.9, 0.1], &[0.5, 0.5]).unwrap();
        assert_eq!(acc.positions(), 2);
        assert!((acc.mean_alpha().unwrap() - 0.8).abs() < 1e-6);
        assert!((acc.std_alpha().unwrap() - 0.2).abs() < 1e-6);
        let e = acc.expected_tokens_per_step(3).unwrap();
        assert!((e - (1.0 - 0.8f64.powi(4)) / 0.2).abs() < 1e-6);
        assert!((acc.expected_speedup(3, 0.0).unwrap() - e).abs() < 1e-12);
        assert!(acc.add(&[1.0], &[0.5, 0.5]).is_err());
    }
}
