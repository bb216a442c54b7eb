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
//! would use, to one [`OfflineAcceptance`] per rule; [`teacher_forced_head`] does the same for
//! an MTP head drafting for its own model's next-token head (self-speculation).

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
/// per model and sequence) and adds every position to each accumulator of `accs` (one per
/// rule, sharing the forwards). Both distributions at position `t` come from
/// `sampler.distribution(logits, tokens[..t], None)`.
///
/// # Errors
/// [`InferError::ModelMismatch`] for different vocabularies, [`InferError::InvalidRequest`]
/// for an empty continuation, and model errors.
pub fn teacher_forced<M, D>(
    target: &M,
    draft: &D,
    sequences: &[ForcedSequence<M::Prompt>],
    sampler: &SamplerConfig,
    accs: &mut [OfflineAcceptance],
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
    check(target, sampler, accs)?;
    for (i, seq) in sequences.iter().enumerate() {
        let rows_t = forced_rows(target, seq, i, 1)?;
        let rows_d = forced_rows(draft, seq, i, 1)?;
        for (t, (q, p)) in rows_t.iter().zip(&rows_d).enumerate() {
            let history = &seq.tokens[..t];
            let q = sampler.distribution(q, history, None);
            let p = sampler.distribution(p, history, None);
            for acc in accs.iter_mut() {
                acc.add(&p, &q)?;
            }
        }
    }
    Ok(())
}

/// Offline acceptance of MTP head `head` (≥ 1) as the drafter of self-speculation: at every
/// position `t ≥ head` of each continuation, the draft law is head `head` at the position
/// `head` tokens earlier and the target law is head 0 just before token `t`. One prefill and
/// one extend per sequence.
///
/// # Errors
/// [`InferError::InvalidSetting`] when `head` is 0 or not below `model.n_heads()`;
/// [`InferError::InvalidRequest`] for an empty continuation; model errors.
pub fn teacher_forced_head<M: LanguageModel>(
    model: &M,
    head: usize,
    sequences: &[ForcedSequence<M::Prompt>],
    sampler: &SamplerConfig,
    accs: &mut [OfflineAcceptance],
) -> Result<()> {
    if head == 0 || head >= model.n_heads() {
        return Err(InferError::InvalidSetting {
            name: "head",
            value: head.to_string(),
            expected: format!("an extra head, 1..{}", model.n_heads()),
        });
    }
    check(model, sampler, accs)?;
    let vocab = model.vocab_size();
    for (i, seq) in sequences.iter().enumerate() {
        let rows = forced_rows(model, seq, i, head + 1)?;
        for t in head..rows.len() {
            let history = &seq.tokens[..t];
            let q = sampler.distribution(&rows[t][..vocab], history, None);
            let drafted = &rows[t - head][head * vocab..(head + 1) * vocab];
            let p = sampler.distribution(drafted, history, None);
            for acc in accs.iter_mut() {
                acc.add(&p, &q)?;
            }
        }
    }
    Ok(())
}

fn check<M: LanguageModel>(
    model: &M,
    sampler: &SamplerConfig,
    accs: &[OfflineAcceptance],
) -> Result<()> {
    sampler.validate()?;
    accs.iter()
        .try_for_each(|acc| acc.rule.validate(Some(model.vocab_size())))
}

/// Logits of the first `heads` heads (`[heads · vocab]` per row) before each token of the
/// continuation: the prefill's row, then the extend's rows for all but the last token.
fn forced_rows<M: LanguageModel>(
    model: &M,
    seq: &ForcedSequence<M::Prompt>,
    index: usize,
    heads: usize,
) -> Result<Vec<Vec<f32>>> {
    let tokens = &seq.tokens;
    if tokens.is_empty() {
        return Err(InferError::InvalidRequest {
            detail: format!("teacher-forced sequence {index} has no tokens"),
        });
    }
    let vocab = model.vocab_size();
    let capacity = model.prompt_len(&seq.prompt) + tokens.len();
    let mut cache = model.new_cache(1, capacity)?;
    let first = model.prefill(
        &mut cache,
        std::slice::from_ref(&seq.prompt),
        LogitsRequest::heads_at_last(heads),
    )?;
    let row = |logits: &crate::lm::Logits, pos: usize| -> Vec<f32> {
        (0..heads)
            .flat_map(|h| logits.row(0, pos, h).iter().copied())
            .collect()
    };
    let mut rows = Vec::with_capacity(tokens.len());
    rows.push(row(&first, 0));
    if tokens.len() > 1 {
        let block = vec![tokens[..tokens.len() - 1].to_vec()];
        let request = LogitsRequest {
            heads,
            last_only: false,
        };
        let logits = model.extend(&mut cache, &block, request)?;
        for pos in 0..tokens.len() - 1 {
            rows.push(row(&logits, pos));
        }
    }
    debug_assert!(rows.iter().all(|r| r.len() == heads * vocab));
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
