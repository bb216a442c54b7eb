//! [`FrameSpeculativeDecoder`]: a draft [`FrameModel`] proposes `γ` columns, the target scores
//! them in one forward, and an [`crate::AcceptanceRule`] verifies every free stream position of every
//! drafted step on its own.
//!
//! ```text
//! state:  decided columns c_0 … c_s; the target cache holds c_0 … c_s except a pending last
//!         column (or, right after the prefill, all of them and the logits after c_s)
//! draft:  x_1 ~ p(· | c_≤s), extend(x_1), x_2 ~ p(· | c_≤s, x_1), … x_γ   (per free position,
//!         the same sampler, history and banned classes as the target; forced ids copied)
//! target: extend([pending, x_1, …, x_γ]) → q_1 … q_{γ+1}                 (one forward)
//! verify: step i = 1 … γ: every free position (i, j) on its own with the rule's one-position
//!         step (exact: keep x_ij w.p. min(1, q_ij / p_ij), else draw the residual
//!         norm(max(0, q_ij − p_ij))); forced positions copied, never verified.
//!         The block ends at the first step with a rejection: there the rejected streams take
//!         their correction and the others keep their draft. All γ kept: a bonus column is
//!         drawn from q_{γ+1}.
//! caches: both truncated to c_0 … c_{s+a} (a = steps kept whole); the new last column is
//!         pending for the next block's extends.
//! EOS:    stream 0's EOS (drafted or emitted) fixes T, later positions past T are forced S,
//!         and a drafted column that completes the sequence is not fed (nothing follows it).
//! ```
//!
//! # Why the exact rule keeps the target's distribution
//!
//! Fix the decided prefix `c_≤s` (and the end `T` it implies, if any). Under the target, the
//! next column is produced by drawing every free position `(s+1, j)` independently from the
//! target's head `q_j(· | c_≤s)` — the heads are conditionally independent given the prefix —
//! and then overwriting the positions past a newly fixed `T` with `S` (a deterministic map
//! `g`). So the target's law of `c_{s+1}` is `g_*(Π_j q_j)`.
//!
//! In a block, at drafted step `i` (every earlier drafted step kept whole, so the prefix the
//! draft conditioned on is exactly the decided prefix, with the same forced positions, histories
//! and banned classes on both sides), each free position `j` runs the exact rule on its own draw
//! `x_j ~ p_j` with its own fresh uniforms: the token it emits, `y_j = x_j` if kept, else the
//! residual draw, is distributed as `q_j` (Leviathan et al. 2023, Theorem 1: `P(y = t) =
//! min(p_j(t), q_j(t)) + (1 − Σ min(p_j, q_j)) · residual(t) = q_j(t)`). Distinct streams use
//! distinct draft draws and distinct uniforms, and the draft's draws are independent across
//! streams given the prefix, so `(y_1, …, y_K) ~ Π_j q_j`, and the column `g(y)` follows the
//! target's law. The bonus column is drawn directly from `Π_j q_j` and mapped by `g`.
//!
//! Whether the block goes on after step `i` (no rejection) or stops (some rejection) depends
//! on the draws of step `i`, but it only decides *which forward* supplies the target's
//! distributions of step `i + 1`: the same block's row `q_{i+1}` (computed on the kept column,
//! which equals the draft column there) or the next block's first row (computed on the corrected
//! column). Both are the target's conditional given the emitted prefix, and the next draws are
//! fresh. By induction over steps, the whole grid follows the target's joint distribution.
//! Greedy decoding is the special case of one-hot distributions, so it reproduces
//! [`super::FrameArDecoder`] token for token.

use super::layout::{Layout, Slot};
use super::model::{FrameLogits, FrameModel};
use super::{FrameDecoder, FrameGeneration, FrameRequest, FrameStats, finish, timed};
use crate::error::{InferError, Result};
use crate::sampler::{SamplerConfig, sample, seeded_rng};
use crate::speculative::{SpeculativeConfig, check_sampler};
use crate::verify::{AcceptanceRule, verify_position};

/// How the verdicts of one step's streams become the emitted column. Only `Independent` is
/// correct; the other exists for the tests' negative control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum ColumnRule {
    /// Every stream keeps its own verdict (kept draft or correction).
    Independent,
    /// Broken: on any rejection, every free stream of the step is redrawn from the target.
    ResampleAllOnReject,
}

/// Speculative decoding of a [`FrameModel`] with a draft frame model `D` of the same streams,
/// vocabulary and delays. `γ` and its adaptation follow [`SpeculativeConfig`] (`γ` counts
/// drafted steps).
#[derive(Debug)]
pub struct FrameSpeculativeDecoder<D> {
    draft: D,
    config: SpeculativeConfig,
    /// Per-stream acceptance rules overriding `config.rule` (empty: `config.rule` for all).
    stream_rules: Vec<AcceptanceRule>,
    column_rule: ColumnRule,
}

impl<D: FrameModel> FrameSpeculativeDecoder<D> {
    /// A decoder drafting with `draft`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] from [`SpeculativeConfig::validate`].
    pub fn new(draft: D, config: SpeculativeConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            draft,
            config,
            stream_rules: Vec::new(),
            column_rule: ColumnRule::Independent,
        })
    }

    /// Stream `j` verifies with `rules[j]` instead of the config's rule: PCG with each
    /// stream's own similarity groups (the streams have distinct codebooks), or any mix.
    /// `γ` and its adaptation still follow the config.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for no rule or an invalid one (the count and
    /// vocabularies are checked against the model in `generate`).
    pub fn with_stream_rules(mut self, rules: Vec<AcceptanceRule>) -> Result<Self> {
        if rules.is_empty() {
            return Err(InferError::InvalidSetting {
                name: "stream rules",
                value: "none".into(),
                expected: "one acceptance rule per stream".into(),
            });
        }
        for rule in &rules {
            rule.validate(None)?;
        }
        self.stream_rules = rules;
        Ok(self)
    }

    /// The draft model.
    pub fn draft(&self) -> &D {
        &self.draft
    }

    /// The settings.
    pub fn config(&self) -> &SpeculativeConfig {
        &self.config
    }

    /// Swaps in a (broken) way of combining the streams' verdicts: the tests' negative control.
    #[cfg(test)]
    pub(crate) fn with_column_rule(mut self, column_rule: ColumnRule) -> Self {
        self.column_rule = column_rule;
        self
    }
}

/// Checks that target and draft agree on streams, vocabulary, special token and delays.
///
/// # Errors
/// [`InferError::ModelMismatch`] naming what differs.
fn check_draft<M: FrameModel, D: FrameModel>(model: &M, draft: &D) -> Result<()> {
    let mismatch = |what, target: String, draft: String| {
        Err(InferError::ModelMismatch {
            what,
            target,
            draft,
        })
    };
    if model.streams() != draft.streams() {
        return mismatch(
            "number of streams",
            model.streams().to_string(),
            draft.streams().to_string(),
        );
    }
    if model.vocab() != draft.vocab() {
        return mismatch(
            "classes per head",
            model.vocab().to_string(),
            draft.vocab().to_string(),
        );
    }
    if model.special() != draft.special() {
        return mismatch(
            "special token",
            model.special().to_string(),
            draft.special().to_string(),
        );
    }
    if model.delays() != draft.delays() {
        return mismatch(
            "stream delays",
            format!("{:?}", model.delays()),
            format!("{:?}", draft.delays()),
        );
    }
    Ok(())
}

/// One drafted step: per stream the token drawn (or the forced id) and the draft distribution
/// it was drawn from (`None` where forced), and the column fed to the models.
struct Drafted {
    raw: Vec<u32>,
    probs: Vec<Option<Vec<f32>>>,
    column: Vec<u32>,
}

/// An internal invariant broke (a decoder bug, reported instead of panicking).
fn internal(detail: &str) -> InferError {
    InferError::Model(format!("frame speculative decoder: {detail}"))
}

/// The logits row the target scores drafted step `i` (0-based) with: after the last pending
/// column (row `pending − 1` of this block's forward) or, with nothing pending, the logits
/// held since the prefill.
fn target_row<'a>(
    held: Option<&'a FrameLogits>,
    block: Option<&'a FrameLogits>,
    pending: usize,
    i: usize,
    j: usize,
) -> Result<&'a [f32]> {
    if pending == 0 && i == 0 {
        held.map(|l| l.row(0, j))
            .ok_or_else(|| internal("no target logits for the first drafted step"))
    } else {
        block
            .map(|l| l.row(pending + i - 1, j))
            .ok_or_else(|| internal("no target forward for a drafted step"))
    }
}

impl<M, D> FrameDecoder<M> for FrameSpeculativeDecoder<D>
where
    M: FrameModel,
    D: FrameModel<Prompt = M::Prompt>,
{
    fn name(&self) -> String {
        format!("frame-{}", self.config.name())
    }

    fn generate(
        &self,
        model: &M,
        request: &FrameRequest<M::Prompt>,
        sampler: &SamplerConfig,
    ) -> Result<FrameGeneration> {
        sampler.validate()?;
        check_sampler(sampler)?;
        check_draft(model, &self.draft)?;
        let layout = Layout::new(model, request)?;
        let rules: Vec<&AcceptanceRule> = if self.stream_rules.is_empty() {
            vec![&self.config.rule; layout.streams]
        } else if self.stream_rules.len() == layout.streams {
            self.stream_rules.iter().collect()
        } else {
            return Err(InferError::InvalidSetting {
                name: "stream rules",
                value: format!("{} rules", self.stream_rules.len()),
                expected: format!("one per stream of the model ({})", layout.streams),
            });
        };
        for rule in &rules {
            rule.validate(Some(layout.vocab))?;
        }
        let draft = &self.draft;
        let (k, vocab) = (layout.streams, layout.vocab);
        let mut stats = FrameStats::new(k);
        let mut rng = seeded_rng(request.seed);
        let capacity = layout.steps(layout.max_frames);
        let mut target_cache = model.new_cache(&request.prompt, capacity)?;
        let mut draft_cache = draft.new_cache(&request.prompt, capacity)?;
        let mut columns = layout.known_columns();
        let known = columns.len();
        let first = timed(&mut stats.model_time, &mut stats.target_forwards, || {
            model.prefill(&mut target_cache, &request.prompt, &columns)
        })?;
        first.check(1, k, vocab)?;
        let first_draft = timed(&mut stats.model_time, &mut stats.draft_forwards, || {
            draft.prefill(&mut draft_cache, &request.prompt, &columns)
        })?;
        first_draft.check(1, k, vocab)?;
        // Logits after the last fed column, valid while nothing is pending.
        let mut held_t = Some(first);
        let mut held_d = Some(first_draft);
        let (mut fed_t, mut fed_d) = (known, known);
        let mut end = None;
        let mut history: Vec<Vec<u32>> = vec![Vec::new(); k];
        let mut gamma = self.config.gamma;

        while !layout.done(columns.len(), end) {
            let s1 = columns.len(); // step of the first drafted column
            let left = layout.steps(layout.bound(end)) - s1;
            // Draft phase.
            let mut drafts: Vec<Drafted> = Vec::with_capacity(gamma);
            let mut d_end = end;
            let mut d_history = history.clone();
            for i in 0..gamma.min(left) {
                let step = s1 + i;
                let logits = match held_d.take() {
                    Some(l) if i == 0 && fed_d == s1 => l,
                    _ => {
                        let feed: Vec<Vec<u32>> = if i == 0 {
                            columns[fed_d..].to_vec()
                        } else {
                            vec![drafts[i - 1].column.clone()]
                        };
                        let l = timed(&mut stats.model_time, &mut stats.draft_forwards, || {
                            draft.extend(&mut draft_cache, &feed)
                        })?;
                        l.check(feed.len(), k, vocab)?;
                        fed_d += feed.len();
                        l
                    }
                };
                let last = logits.steps() - 1;
                let mut raw = Vec::with_capacity(k);
                let mut probs = Vec::with_capacity(k);
                for (j, hist) in d_history.iter().enumerate() {
                    match layout.slot(j, step, d_end) {
                        Slot::Forced(id) => {
                            raw.push(id);
                            probs.push(None);
                        }
                        Slot::Free { frame } => {
                            let p = sampler.distribution(
                                logits.row(last, j),
                                hist,
                                layout.banned(j, frame),
                            );
                            raw.push(sample(&p, &mut rng));
                            probs.push(Some(p));
                        }
                    }
                }
                let column = layout.finish_column(step, &raw, &mut d_end);
                layout.record(step, &column, d_end, &mut d_history);
                drafts.push(Drafted { raw, probs, column });
                if layout.done(step + 1, d_end) {
                    break;
                }
            }
            let gamma_eff = drafts.len();
            if gamma_eff == 0 {
                return Err(internal("nothing drafted before the end"));
            }

            // Target phase: one forward over [pending…, drafts…] (a completing draft not fed).
            let completes = layout.done(s1 + gamma_eff, d_end);
            let fed_drafts = if completes { gamma_eff - 1 } else { gamma_eff };
            let pending = s1 - fed_t;
            let block: Vec<Vec<u32>> = columns[fed_t..]
                .iter()
                .cloned()
                .chain(drafts[..fed_drafts].iter().map(|d| d.column.clone()))
                .collect();
            let scored = if block.is_empty() {
                None
            } else {
                let l = timed(&mut stats.model_time, &mut stats.target_forwards, || {
                    model.extend(&mut target_cache, &block)
                })?;
                l.check(block.len(), k, vocab)?;
                fed_t += block.len();
                Some(l)
            };

            // Verification, step by step.
            let mut kept_steps = 0;
            for (i, d) in drafts.iter().enumerate() {
                let step = s1 + i;
                let mut raw = d.raw.clone();
                let mut targets: Vec<Option<Vec<f32>>> = vec![None; k];
                let mut rejected = false;
                for j in 0..k {
                    match layout.slot(j, step, end) {
                        Slot::Forced(id) => raw[j] = id,
                        Slot::Free { frame } => {
                            let p = d.probs[j]
                                .as_deref()
                                .ok_or_else(|| internal("a free position was not drafted"))?;
                            let q = sampler.distribution(
                                target_row(held_t.as_ref(), scored.as_ref(), pending, i, j)?,
                                &history[j],
                                layout.banned(j, frame),
                            );
                            let verdict = verify_position(rules[j], d.raw[j], p, &q, &mut rng)?;
                            stats.drafted[j] += 1;
                            stats.thinning_trials += verdict.trials;
                            match verdict.replacement {
                                None => stats.accepted[j] += 1,
                                Some(y) => {
                                    raw[j] = y;
                                    rejected = true;
                                }
                            }
                            targets[j] = Some(q);
                        }
                    }
                }
                if rejected && self.column_rule == ColumnRule::ResampleAllOnReject {
                    for (slot, q) in raw.iter_mut().zip(&targets) {
                        if let Some(q) = q {
                            *slot = sample(q, &mut rng);
                        }
                    }
                }
                stats.drafted_steps += 1;
                let column = layout.finish_column(step, &raw, &mut end);
                layout.record(step, &column, end, &mut history);
                columns.push(column);
                if rejected {
                    break;
                }
                stats.accepted_steps += 1;
                kept_steps += 1;
            }
            if kept_steps == gamma_eff && !layout.done(columns.len(), end) {
                // Bonus column from the target's row after the last draft.
                let step = columns.len();
                let mut raw = Vec::with_capacity(k);
                for (j, hist) in history.iter().enumerate() {
                    raw.push(match layout.slot(j, step, end) {
                        Slot::Forced(id) => id,
                        Slot::Free { frame } => {
                            let row = target_row(
                                held_t.as_ref(),
                                scored.as_ref(),
                                pending,
                                gamma_eff,
                                j,
                            )?;
                            let q = sampler.distribution(row, hist, layout.banned(j, frame));
                            sample(&q, &mut rng)
                        }
                    });
                }
                let column = layout.finish_column(step, &raw, &mut end);
                layout.record(step, &column, end, &mut history);
                columns.push(column);
            }
            gamma = self.config.next_gamma(gamma, gamma_eff, kept_steps);
            if layout.done(columns.len(), end) {
                break;
            }
            // Roll back to the columns both sides share: c_0 … c_{s+a}; the rest is pending.
            let valid = s1 + kept_steps;
            fed_t = fed_t.min(valid);
            model.truncate(&mut target_cache, fed_t)?;
            fed_d = fed_d.min(valid);
            draft.truncate(&mut draft_cache, fed_d)?;
            held_t = None;
            held_d = None;
        }
        finish(&layout, columns, end, known, stats)
    }
}
