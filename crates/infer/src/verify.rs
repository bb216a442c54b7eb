//! Verification of drafted tokens with the acceptance rule as data.
//!
//! One function, [`verify`], checks `γ` drafted tokens `x_0..x_{γ-1}` drawn from draft
//! distributions `p_0..p_{γ-1}` against the target's `q_0..q_γ` (`q_γ` is the distribution
//! after the last draft, for the bonus token) and returns how many drafts are kept and the
//! token that follows them. Rules:
//!
//! - [`AcceptanceRule::Exact`] — speculative sampling (Leviathan et al. 2023, Chen et al.
//!   2023): keep `x_i` with probability `min(1, q_i(x_i) / p_i(x_i))`; at the first rejection
//!   draw from `norm(max(0, q_i − p_i))`; when all are kept draw a bonus from `q_γ`. The output
//!   is distributed exactly as the target's.
//! - [`AcceptanceRule::Tolerance`] — SSD (Lin et al. 2025, "Accelerating Autoregressive Speech Synthesis Inference With
//!   Speech Speculative Decoding", eq. 5): keep when
//!   `r < min(1, q/p) + β`, residual as above. Only tokens the target's sampler can emit
//!   (`q_i(x_i) > 0`) profit from β, so top-k/top-p, a banned end-of-sequence and greedy
//!   decoding stay respected; β = 0 is `Exact`, draw for draw.
//! - [`AcceptanceRule::Groups`] — PCG (Yanuka et al., "Principled Coarse-Grained Acceptance for Speculative Decoding
//!   in Speech", §2.2, Algorithm 1): draw a group
//!   label `K ∈ S(x_i)` with the equal-split weights, keep `x_i` with probability
//!   `min(1, Q_c(G_K) / P_c(G_K))`; on rejection draw a group from the residual
//!   `[Q_c − P_c]_+` by thinning (draw `y ~ q_i`, `K' ∈ S(y)`, keep with
//!   `[1 − P_c(G_K') / Q_c(G_K')]_+`) and emit `y`, which given `K'` is distributed as
//!   `q_i(t) w_{K',t} / Q_c(G_K')` (eq. 10). After [`MAX_THINNING_TRIALS`] failed trials the
//!   residual is enumerated over all groups (exact fallback). The emitted group is distributed
//!   exactly as `Q_c`. When an accepted draft token is one the target cannot emit
//!   (`q_i(x_i) = 0`, e.g. greedy), the group is kept but the token is redrawn inside it from
//!   eq. 10 and verification stops there; this keeps the group law and makes greedy PCG equal
//!   greedy AR.
//! - [`AcceptanceRule::Typical`] — Medusa's typical acceptance (Cai et al. 2024): keep `x_i`
//!   when `q_i(x_i) > min(ε, δ · exp(−H(q_i)))`; at the first rejection draw from `q_i`.
//!
//! Distributions are host `f32` slices summing to 1 (as [`crate::SamplerConfig::distribution`]
//! returns them); sums are taken in `f64`.

use std::sync::Arc;

use rand::Rng;
use rand::rngs::StdRng;

use crate::error::{InferError, Result};
use crate::groups::SimilarityGroups;

/// Thinning draws of the PCG residual sampler before the exact enumeration takes over. The
/// expected number of draws is `1 / TV(P_c, Q_c)` (the PCG paper saw ≤ 3 on average).
pub const MAX_THINNING_TRIALS: usize = 64;

/// How drafted tokens are accepted.
#[derive(Debug, Clone, PartialEq)]
pub enum AcceptanceRule {
    /// Exact speculative sampling: the output follows the target distribution.
    Exact,
    /// SSD tolerance: accept when `r < min(1, q/p) + beta` (`beta ≥ 0`; SSD used 0.4).
    Tolerance {
        /// Added to the acceptance probability.
        beta: f32,
    },
    /// PCG: group-level acceptance over acoustic similarity groups.
    Groups(Arc<SimilarityGroups>),
    /// Medusa typical acceptance: `q(x) > min(eps, delta · exp(−H(q)))` (Medusa: 0.09, 0.3).
    Typical {
        /// Probability that always suffices.
        eps: f32,
        /// Scale of the entropy-dependent threshold.
        delta: f32,
    },
}

impl AcceptanceRule {
    /// Short name for tables and logs: `sd`, `ssd`, `pcg`, `typical`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Exact => "sd",
            Self::Tolerance { .. } => "ssd",
            Self::Groups(_) => "pcg",
            Self::Typical { .. } => "typical",
        }
    }

    /// Checks the rule's parameters (and, for groups, the vocabulary size when given).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming `beta`, `eps` or `delta`;
    /// [`InferError::ModelMismatch`] when the groups were built for another vocabulary.
    pub fn validate(&self, vocab: Option<usize>) -> Result<()> {
        let bad = |name, value: f32, expected: &str| {
            Err(InferError::InvalidSetting {
                name,
                value: value.to_string(),
                expected: expected.into(),
            })
        };
        match self {
            Self::Exact => Ok(()),
            Self::Tolerance { beta } if !(beta.is_finite() && *beta >= 0.0) => {
                bad("beta", *beta, "finite and >= 0")
            }
            Self::Tolerance { .. } => Ok(()),
            Self::Typical { eps, .. } if !(*eps > 0.0 && *eps <= 1.0) => {
                bad("eps", *eps, "in (0, 1]")
            }
            Self::Typical { delta, .. } if !(delta.is_finite() && *delta >= 0.0) => {
                bad("delta", *delta, "finite and >= 0")
            }
            Self::Typical { .. } => Ok(()),
            Self::Groups(groups) => match vocab {
                Some(v) if v != groups.vocab() => Err(InferError::ModelMismatch {
                    what: "vocabulary size of the similarity groups",
                    target: v.to_string(),
                    draft: groups.vocab().to_string(),
                }),
                _ => Ok(()),
            },
        }
    }
}

/// The outcome of verifying one block of drafts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Leading drafts kept (`0..=γ`).
    pub accepted: usize,
    /// The token emitted after them: the correction at the first rejection, or the bonus
    /// drawn from `q_γ` when every draft was kept.
    pub next: u32,
    /// Candidate draws of the PCG residual sampler (0 for the other rules).
    pub trials: usize,
    /// Whether the PCG residual needed the exact enumeration after [`MAX_THINNING_TRIALS`].
    pub fallback: bool,
    /// PCG only: the group label of every emitted token (`accepted + 1` entries); empty for
    /// the other rules.
    pub groups: Vec<u32>,
}

/// Verifies `drafts` (`x_i ~ draft[i]`) against `target` and draws the token after the kept
/// ones.
///
/// `draft` holds `γ = drafts.len()` distributions and `target` `γ + 1` (the last for the
/// bonus); all have the vocabulary's length. `γ = 0` draws one token from `target[0]`.
///
/// # Errors
/// [`InferError::InvalidRequest`] when the counts do not match (a draft longer than the
/// target), distributions differ in length, a token is outside the vocabulary, or a draft token
/// has probability 0 under its own draft distribution; errors of [`AcceptanceRule::validate`].
pub fn verify<P: AsRef<[f32]>, Q: AsRef<[f32]>>(
    rule: &AcceptanceRule,
    drafts: &[u32],
    draft: &[P],
    target: &[Q],
    rng: &mut StdRng,
) -> Result<Verdict> {
    verify_with_trials(rule, drafts, draft, target, rng, MAX_THINNING_TRIALS)
}

/// [`verify`] with a chosen bound on the thinning draws (0 always enumerates the residual).
fn verify_with_trials<P: AsRef<[f32]>, Q: AsRef<[f32]>>(
    rule: &AcceptanceRule,
    drafts: &[u32],
    draft: &[P],
    target: &[Q],
    rng: &mut StdRng,
    max_trials: usize,
) -> Result<Verdict> {
    let vocab = check_inputs(drafts, draft, target)?;
    rule.validate(Some(vocab))?;
    let mut verdict = Verdict {
        accepted: 0,
        next: 0,
        trials: 0,
        fallback: false,
        groups: Vec::new(),
    };
    for (i, &x) in drafts.iter().enumerate() {
        let (p, q) = (draft[i].as_ref(), target[i].as_ref());
        match rule_step(rule, x, p, q, rng, max_trials, &mut verdict) {
            Step::Keep => verdict.accepted += 1,
            Step::Stop(token) => {
                verdict.next = token;
                return Ok(verdict);
            }
        }
    }
    let bonus = target[drafts.len()].as_ref();
    verdict.next = crate::sampler::sample(bonus, rng);
    if let AcceptanceRule::Groups(groups) = rule {
        verdict.groups.push(pick_group(groups, verdict.next, rng));
    }
    Ok(verdict)
}

/// Probability that a draft token drawn from `p` is kept against `q` under `rule` (one
/// position; the acceptance rate α of that position). For PCG this counts the draws whose
/// draft token survives (a group accepted with `q(x) = 0` ends the block).
///
/// # Errors
/// [`InferError::InvalidRequest`] when `p` and `q` differ in length;
/// errors of [`AcceptanceRule::validate`].
pub fn acceptance_probability(rule: &AcceptanceRule, p: &[f32], q: &[f32]) -> Result<f64> {
    if p.len() != q.len() || p.is_empty() {
        return Err(InferError::InvalidRequest {
            detail: format!(
                "draft distribution has {} entries, target {}",
                p.len(),
                q.len()
            ),
        });
    }
    rule.validate(Some(q.len()))?;
    let pairs = p.iter().zip(q).map(|(&a, &b)| (f64::from(a), f64::from(b)));
    let alpha: f64 = match rule {
        AcceptanceRule::Exact => pairs.map(|(p, q)| p.min(q)).sum(),
        AcceptanceRule::Tolerance { beta } => {
            let beta = f64::from(*beta);
            pairs
                .filter(|&(p, q)| p > 0.0 && q > 0.0)
                .map(|(p, q)| p * ((q / p).min(1.0) + beta).min(1.0))
                .sum()
        }
        AcceptanceRule::Typical { eps, delta } => {
            let threshold = typical_threshold(q.iter().map(|&v| f64::from(v)), *eps, *delta);
            pairs.filter(|&(_, q)| q > threshold).map(|(p, _)| p).sum()
        }
        AcceptanceRule::Groups(groups) => {
            let big_p = groups.coarse_distribution(p);
            let big_q = groups.coarse_distribution(q);
            let mut alpha = 0.0;
            for (t, (p, q)) in pairs.enumerate() {
                if p <= 0.0 || q <= 0.0 {
                    continue;
                }
                let w = groups.weight(t as u32);
                for &k in groups.groups_of(t as u32) {
                    let (pk, qk) = (big_p[k as usize], big_q[k as usize]);
                    alpha += p * w * (qk / pk).min(1.0);
                }
            }
            alpha
        }
    };
    // f32 distributions sum to 1 only up to rounding: keep α a probability.
    Ok(alpha.clamp(0.0, 1.0))
}

enum Step {
    Keep,
    Stop(u32),
}

/// One position of any rule: keep `x` or stop with the token emitted instead. PCG records its
/// group label and thinning draws in `verdict`.
fn rule_step(
    rule: &AcceptanceRule,
    x: u32,
    p: &[f32],
    q: &[f32],
    rng: &mut StdRng,
    max_trials: usize,
    verdict: &mut Verdict,
) -> Step {
    match rule {
        AcceptanceRule::Exact => ratio_step(x, p, q, 0.0, rng),
        AcceptanceRule::Tolerance { beta } => ratio_step(x, p, q, f64::from(*beta), rng),
        AcceptanceRule::Typical { eps, delta } => typical_step(x, q, *eps, *delta, rng),
        AcceptanceRule::Groups(groups) => group_step(groups, x, p, q, rng, max_trials, verdict),
    }
}

/// The outcome of verifying one drafted token on its own ([`verify_position`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PositionVerdict {
    /// `None` when the draft token is kept, else the token emitted in its place (the
    /// correction; for PCG with `q(x) = 0`, the redraw inside the accepted group).
    pub replacement: Option<u32>,
    /// Candidate draws of the PCG residual sampler (0 for the other rules).
    pub trials: usize,
}

/// Verifies one drafted token `x ~ p` against the target's `q` with exactly the per-position
/// step [`verify`] applies at each position of a block (no bonus draw): the multi-stream
/// decoders verify every stream of a drafted step independently with it. The caller validates
/// `rule` once ([`AcceptanceRule::validate`]).
///
/// # Errors
/// [`InferError::InvalidRequest`] when `p` and `q` differ in length or are empty, `x` is
/// outside them, or `p(x)` is not positive.
pub(crate) fn verify_position(
    rule: &AcceptanceRule,
    x: u32,
    p: &[f32],
    q: &[f32],
    rng: &mut StdRng,
) -> Result<PositionVerdict> {
    check_inputs(&[x], &[p], &[q, q])?;
    let mut verdict = Verdict {
        accepted: 0,
        next: 0,
        trials: 0,
        fallback: false,
        groups: Vec::new(),
    };
    let replacement = match rule_step(rule, x, p, q, rng, MAX_THINNING_TRIALS, &mut verdict) {
        Step::Keep => None,
        Step::Stop(token) => Some(token),
    };
    Ok(PositionVerdict {
        replacement,
        trials: verdict.trials,
    })
}

fn check_inputs<P: AsRef<[f32]>, Q: AsRef<[f32]>>(
    drafts: &[u32],
    draft: &[P],
    target: &[Q],
) -> Result<usize> {
    let gamma = drafts.len();
    if draft.len() != gamma || target.len() != gamma + 1 {
        return Err(InferError::InvalidRequest {
            detail: format!(
                "{gamma} drafted tokens need {gamma} draft and {} target distributions, got {} \
                 and {} (a draft longer than the target?)",
                gamma + 1,
                draft.len(),
                target.len()
            ),
        });
    }
    let vocab = target[0].as_ref().len();
    if vocab == 0 {
        return Err(InferError::InvalidRequest {
            detail: "empty target distribution".into(),
        });
    }
    for (i, q) in target.iter().enumerate() {
        if q.as_ref().len() != vocab {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "target distribution {i} has {} entries, expected {vocab}",
                    q.as_ref().len()
                ),
            });
        }
    }
    for (i, (p, &x)) in draft.iter().zip(drafts).enumerate() {
        let p = p.as_ref();
        if p.len() != vocab {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "draft distribution {i} has {} entries, the target {vocab}",
                    p.len()
                ),
            });
        }
        match p.get(x as usize) {
            None => {
                return Err(InferError::InvalidRequest {
                    detail: format!("draft token {x} at position {i} is outside vocab {vocab}"),
                });
            }
            Some(&px) if px.is_nan() || px <= 0.0 => {
                return Err(InferError::InvalidRequest {
                    detail: format!(
                        "draft token {x} at position {i} has probability {px} under its draft \
                         distribution"
                    ),
                });
            }
            Some(_) => {}
        }
    }
    Ok(vocab)
}

/// Exact (β = 0) and tolerance steps.
fn ratio_step(x: u32, p: &[f32], q: &[f32], beta: f64, rng: &mut StdRng) -> Step {
    let px = f64::from(p[x as usize]);
    let qx = f64::from(q[x as usize]);
    let r: f64 = rng.random();
    let threshold = if qx > 0.0 {
        (qx / px).min(1.0) + beta
    } else {
        0.0
    };
    if r < threshold {
        Step::Keep
    } else {
        Step::Stop(sample_residual(p, q, rng))
    }
}

/// Draws from `norm(max(0, q − p))`, or from `q` when that is (numerically) empty.
fn sample_residual(p: &[f32], q: &[f32], rng: &mut StdRng) -> u32 {
    let residual = |i: usize| (f64::from(q[i]) - f64::from(p[i])).max(0.0);
    let total: f64 = (0..q.len()).map(residual).sum();
    if total <= 1e-12 {
        return crate::sampler::sample(q, rng);
    }
    let u = rng.random::<f64>() * total;
    let mut acc = 0.0;
    let mut last = 0;
    for i in 0..q.len() {
        let r = residual(i);
        if r > 0.0 {
            acc += r;
            last = i;
            if u < acc {
                return i as u32;
            }
        }
    }
    last as u32
}

fn typical_threshold(q: impl IntoIterator<Item = f64>, eps: f32, delta: f32) -> f64 {
    let entropy: f64 = q
        .into_iter()
        .filter(|&v| v > 0.0)
        .map(|v| -v * v.ln())
        .sum();
    f64::from(eps).min(f64::from(delta) * (-entropy).exp())
}

fn typical_step(x: u32, q: &[f32], eps: f32, delta: f32, rng: &mut StdRng) -> Step {
    let threshold = typical_threshold(q.iter().map(|&v| f64::from(v)), eps, delta);
    if f64::from(q[x as usize]) > threshold {
        Step::Keep
    } else {
        Step::Stop(crate::sampler::sample(q, rng))
    }
}

/// A group label for token `t` with the equal-split weights (uniform over `S(t)`).
fn pick_group(groups: &SimilarityGroups, t: u32, rng: &mut StdRng) -> u32 {
    let of = groups.groups_of(t);
    match of.len() {
        0 => 0,
        1 => of[0],
        n => of[rng.random_range(0..n)],
    }
}

fn group_step(
    groups: &SimilarityGroups,
    x: u32,
    p: &[f32],
    q: &[f32],
    rng: &mut StdRng,
    max_trials: usize,
    verdict: &mut Verdict,
) -> Step {
    let k = pick_group(groups, x, rng) as usize;
    let big_p = groups.coarse_mass(k, p);
    let big_q = groups.coarse_mass(k, q);
    let r: f64 = rng.random();
    if big_p > 0.0 && r < (big_q / big_p).min(1.0) {
        verdict.groups.push(k as u32);
        if q[x as usize] > 0.0 {
            return Step::Keep;
        }
        // The target cannot emit x: keep the group, redraw the token inside it (eq. 10).
        return Step::Stop(sample_in_group(groups, k, q, rng));
    }
    // Residual [Q_c − P_c]_+ by thinning.
    for _ in 0..max_trials {
        verdict.trials += 1;
        let y = crate::sampler::sample(q, rng);
        let k = pick_group(groups, y, rng) as usize;
        let big_q = groups.coarse_mass(k, q);
        let big_p = groups.coarse_mass(k, p);
        let keep = if big_q > 0.0 {
            (1.0 - big_p / big_q).max(0.0)
        } else {
            0.0
        };
        if rng.random::<f64>() < keep {
            verdict.groups.push(k as u32);
            return Step::Stop(y);
        }
    }
    // Exact fallback (after `max_trials` failed draws): enumerate the residual over every group.
    verdict.fallback = true;
    let residual: Vec<f64> = (0..groups.n_groups())
        .map(|k| (groups.coarse_mass(k, q) - groups.coarse_mass(k, p)).max(0.0))
        .collect();
    let total: f64 = residual.iter().sum();
    let k = if total > 1e-12 {
        let u = rng.random::<f64>() * total;
        let mut acc = 0.0;
        let mut chosen = None;
        let mut last = 0;
        for (k, &r) in residual.iter().enumerate() {
            if r > 0.0 {
                acc += r;
                last = k;
                if u < acc {
                    chosen = Some(k);
                    break;
                }
            }
        }
        chosen.unwrap_or(last)
    } else {
        // P_c = Q_c up to rounding: the residual is empty, draw the group from Q_c.
        let y = crate::sampler::sample(q, rng);
        pick_group(groups, y, rng) as usize
    };
    verdict.groups.push(k as u32);
    Step::Stop(sample_in_group(groups, k, q, rng))
}

/// Draws a member `t` of group `k` with probability `q(t) w_{k,t} / Q_c(G_k)` (PCG paper, eq.
/// 10); uniform over the members when the group has no mass under `q`.
fn sample_in_group(groups: &SimilarityGroups, k: usize, q: &[f32], rng: &mut StdRng) -> u32 {
    let members = groups.members(k);
    let mass = |t: u32| f64::from(q[t as usize]) * groups.weight(t);
    let total: f64 = members.iter().map(|&t| mass(t)).sum();
    if total <= 0.0 {
        return members[rng.random_range(0..members.len())];
    }
    let u = rng.random::<f64>() * total;
    let mut acc = 0.0;
    let mut last = members[0];
    for &t in members {
        let m = mass(t);
        if m > 0.0 {
            acc += m;
            last = t;
            if u < acc {
                return t;
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::seeded_rng;

    fn one_hot(v: usize, i: usize) -> Vec<f32> {
        let mut p = vec![0.0; v];
        p[i] = 1.0;
        p
    }

    #[test]
    fn greedy_distributions_accept_exactly_the_argmax_prefix() {
        // drafts 2, 1, 3; target argmaxes 2, 1, 0, then 3
        let draft: Vec<Vec<f32>> = [2, 1, 3].iter().map(|&i| one_hot(4, i)).collect();
        let target: Vec<Vec<f32>> = [2, 1, 0, 3].iter().map(|&i| one_hot(4, i)).collect();
        let groups =
            SimilarityGroups::from_lists(4, 0.5, &[vec![0, 3], vec![1, 2], vec![0, 1]]).unwrap();
        for rule in [
            AcceptanceRule::Exact,
            AcceptanceRule::Tolerance { beta: 0.9 },
            AcceptanceRule::Groups(Arc::new(groups)),
            AcceptanceRule::Typical {
                eps: 0.09,
                delta: 0.3,
            },
        ] {
            for seed in 0..50 {
                let v = verify(&rule, &[2, 1, 3], &draft, &target, &mut seeded_rng(seed)).unwrap();
                assert_eq!((v.accepted, v.next), (2, 0), "{}", rule.name());
            }
        }
    }

    #[test]
    fn all_accepted_draws_the_bonus() {
        let draft = vec![one_hot(3, 1)];
        let target = vec![one_hot(3, 1), one_hot(3, 2)];
        let v = verify(
            &AcceptanceRule::Exact,
            &[1],
            &draft,
            &target,
            &mut seeded_rng(0),
        )
        .unwrap();
        assert_eq!((v.accepted, v.next), (1, 2));
    }

    #[test]
    fn tolerance_zero_is_exact_draw_for_draw() {
        let p = vec![vec![0.5f32, 0.3, 0.2], vec![0.1, 0.1, 0.8]];
        let q = vec![
            vec![0.2f32, 0.5, 0.3],
            vec![0.3, 0.3, 0.4],
            vec![0.6, 0.2, 0.2],
        ];
        for seed in 0..200 {
            let a = verify(
                &AcceptanceRule::Exact,
                &[0, 2],
                &p,
                &q,
                &mut seeded_rng(seed),
            );
            let b = verify(
                &AcceptanceRule::Tolerance { beta: 0.0 },
                &[0, 2],
                &p,
                &q,
                &mut seeded_rng(seed),
            );
            assert_eq!(a, b);
        }
    }

    #[test]
    fn mismatched_lengths_are_refused() {
        let p = vec![vec![0.5f32, 0.5], vec![0.5, 0.5]];
        let q = vec![vec![0.5f32, 0.5], vec![0.5, 0.5]];
        let err = verify(&AcceptanceRule::Exact, &[0, 1], &p, &q, &mut seeded_rng(0)).unwrap_err();
        assert!(
            err.to_string().contains("draft longer than the target"),
            "{err}"
        );
        let q3 = vec![vec![0.5f32, 0.5]; 3];
        let err = verify(&AcceptanceRule::Exact, &[0, 7], &p, &q3, &mut seeded_rng(0)).unwrap_err();
        assert!(err.to_string().contains("outside vocab"), "{err}");
        let zero = vec![vec![1.0f32, 0.0], vec![0.5, 0.5]];
        let err = verify(
            &AcceptanceRule::Exact,
            &[1, 0],
            &zero,
            &q3,
            &mut seeded_rng(0),
        )
        .unwrap_err();
        assert!(err.to_string().contains("probability 0"), "{err}");
        let err = verify(
            &AcceptanceRule::Tolerance { beta: -0.1 },
            &[0],
            &p[..1],
            &q,
            &mut seeded_rng(0),
        )
        .unwrap_err();
        assert!(err.to_string().contains("beta"), "{err}");
    }

    #[test]
    fn exact_acceptance_probability_is_one_minus_tv() {
        let p = [0.5f32, 0.3, 0.2];
        let q = [0.2f32, 0.5, 0.3];
        let a = acceptance_probability(&AcceptanceRule::Exact, &p, &q).unwrap();
        assert!((a - 0.7).abs() < 1e-6, "{a}");
        let a = acceptance_probability(&AcceptanceRule::Tolerance { beta: 1.0 }, &p, &q).unwrap();
        assert!((a - 1.0).abs() < 1e-6, "{a}");
    }

    #[test]
    fn thinning_and_enumeration_draw_the_same_residual() {
        // Overlapping groups; conditioned on rejection the emitted group follows
        // [Q_c − P_c]_+ / TV whether thinning (64 trials) or enumeration (0 trials) draws it.
        let groups = Arc::new(
            SimilarityGroups::from_lists(
                6,
                0.5,
                &[
                    vec![0, 1],
                    vec![1, 2, 3],
                    vec![3, 4],
                    vec![4, 5],
                    vec![0, 5],
                ],
            )
            .unwrap(),
        );
        let rule = AcceptanceRule::Groups(groups.clone());
        let p = vec![vec![0.40f32, 0.05, 0.05, 0.30, 0.10, 0.10]];
        let q = vec![vec![0.10f32, 0.20, 0.30, 0.05, 0.05, 0.30]; 2];
        let (pc, qc) = (
            groups.coarse_distribution(&p[0]),
            groups.coarse_distribution(&q[0]),
        );
        let residual: Vec<f64> = pc.iter().zip(&qc).map(|(p, q)| (q - p).max(0.0)).collect();
        let tv: f64 = residual.iter().sum();
        assert!(residual.iter().filter(|&&r| r > 0.0).count() >= 2);
        for max_trials in [0, MAX_THINNING_TRIALS] {
            let mut rng = seeded_rng(5);
            let mut counts = vec![0usize; groups.n_groups()];
            let mut n = 0usize;
            let mut fallbacks = 0usize;
            for _ in 0..100_000 {
                let x = crate::sampler::sample(&p[0], &mut rng);
                let v = verify_with_trials(&rule, &[x], &p, &q, &mut rng, max_trials).unwrap();
                if v.accepted == 0 {
                    counts[v.groups[0] as usize] += 1;
                    n += 1;
                    fallbacks += usize::from(v.fallback);
                }
            }
            assert_eq!(fallbacks == n, max_trials == 0);
            let noise: f64 = residual
                .iter()
                .map(|&r| (r / tv * (1.0 - r / tv) / n as f64).sqrt())
                .sum::<f64>()
                * (2.0 / std::f64::consts::PI).sqrt()
                / 2.0;
            let dist: f64 = counts
                .iter()
                .zip(&residual)
                .map(|(&c, &r)| (c as f64 / n as f64 - r / tv).abs())
                .sum::<f64>()
                / 2.0;
            assert!(
                dist < 3.0 * noise,
                "max_trials {max_trials}: tv {dist} vs {noise}"
            );
        }
    }
}
