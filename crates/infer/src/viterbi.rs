//! Viterbi path selection over the candidates of multi-token-prediction heads (Nguyen et al.,
//! "Accelerating Codec-based Speech Synthesis with Multi-Token Prediction and Speculative
//! Decoding", §III-C and Algorithm 1).
//!
//! The `n` heads of one MTP step give distributions `S_1 .. S_n` over the next `n` tokens. A
//! first-order Markov chain `Q(a_i, a_j)` over stream-0 tokens (see
//! [`Transitions`](crate::transitions::Transitions)) ties neighbours together. The path
//!
//! ```text
//! A* = argmax over (a_1 .. a_n) of  S_1(a_1) · Π_{t=2..n} Q(a_{t-1}, a_t) · S_t(a_t)
//! ```
//!
//! is found by dynamic programming, in log space (sums of logs instead of products, so long
//! paths over small probabilities do not underflow):
//!
//! ```text
//! δ_1(j) = log S_1(j)                                   ψ_1(j) = 0
//! δ_t(j) = max_i [δ_{t-1}(i) + log Q(i, j)] + log S_t(j)  ψ_t(j) = argmax_i [δ_{t-1}(i) + log Q(i, j)]
//! a_n* = argmax_j δ_n(j),   a_t* = ψ_{t+1}(a_{t+1}*)
//! ```
//!
//! Searching all of `V` costs `O(n · V²)`; as in the paper the states are reduced to the `m ≤ k·n`
//! distinct tokens among the `top_k` candidates of each head, so `S` becomes `[n, m]`, `Q` an
//! `m × m` block, and a step costs `O(n · m²)`. Ties go to the lowest candidate index.

use crate::error::{InferError, Result};

/// Settings of Viterbi path selection in the MTP decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViterbiConfig {
    /// Candidates taken from each head (the paper's `top_k`; 3 gave its best WER and UTMOS).
    pub top_k: usize,
    /// Also score the block's first token by `Q(previous token, a_1)`, chaining blocks (off in
    /// the paper, where `δ_1 = S_1`). Only generated tokens count as "previous": the first
    /// block of a sequence is never linked. Off keeps one-head greedy Viterbi equal to AR.
    pub link_previous: bool,
}

impl Default for ViterbiConfig {
    fn default() -> Self {
        Self::new(3)
    }
}

impl ViterbiConfig {
    /// `top_k` candidates per head, blocks not linked (the paper's setting).
    pub fn new(top_k: usize) -> Self {
        Self {
            top_k,
            link_previous: false,
        }
    }

    /// Sets `link_previous`.
    pub fn with_link_previous(mut self, link_previous: bool) -> Self {
        self.link_previous = link_previous;
        self
    }

    /// Checks `top_k ≥ 1`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming `top_k`.
    pub fn validate(&self) -> Result<()> {
        if self.top_k == 0 {
            return Err(InferError::InvalidSetting {
                name: "viterbi_top_k",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        Ok(())
    }
}

/// The distinct tokens of `per_head` candidate lists, in order of first appearance (head 0's
/// first, in its own order): the `m` states of the reduced problem.
pub fn union_candidates(per_head: &[Vec<u32>]) -> Vec<u32> {
    let mut tokens: Vec<u32> = Vec::with_capacity(per_head.iter().map(Vec::len).sum());
    for &t in per_head.iter().flatten() {
        if !tokens.contains(&t) {
            tokens.push(t);
        }
    }
    tokens
}

/// The result of [`Viterbi::best_path`].
#[derive(Debug, Clone, PartialEq)]
pub struct ViterbiPath {
    /// The chosen state (candidate index) at each step.
    pub states: Vec<usize>,
    /// Its log score `log S_1 + Σ (log Q + log S_t)`; −∞ when every path has probability 0.
    pub log_score: f32,
}

/// Algorithm 1 in log space, with its work buffers kept between calls so that a decoder
/// allocates nothing per step once warmed up.
#[derive(Debug, Clone, Default)]
pub struct Viterbi {
    /// `δ_{t-1}` then `δ_t`, `[m]` each.
    delta: Vec<f32>,
    next: Vec<f32>,
    /// Back-pointers `ψ`, `[steps, m]`.
    psi: Vec<u32>,
}

impl Viterbi {
    /// An empty solver.
    pub fn new() -> Self {
        Self::default()
    }

    /// The best path through `steps = log_s.len() / m` steps of `m` states.
    ///
    /// # Shapes
    /// - `log_s`: `[steps, m]` row-major, `log_s[t * m + j] = log S_{t+1}(candidate j)`
    /// - `log_q`: `[m, m]` row-major, `log_q[i * m + j] = log Q(candidate i → candidate j)`
    /// - output: `steps` states in `0..m`
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] when `m = 0`, `log_s` is empty or not a multiple of `m`,
    /// or `log_q` is not `m × m`.
    pub fn best_path(&mut self, log_s: &[f32], log_q: &[f32], m: usize) -> Result<ViterbiPath> {
        self.best_path_from(None, log_s, log_q, m)
    }

    /// [`best_path`](Self::best_path) with an extra score for the first state,
    /// `δ_1(j) = log_prior[j] + log S_1(j)` (e.g. `log Q(previous token, candidate j)`); the
    /// returned score includes it.
    ///
    /// # Shapes
    /// - `log_prior`: `[m]`; `log_s`, `log_q` as in [`best_path`](Self::best_path)
    ///
    /// # Errors
    /// As [`best_path`](Self::best_path), and when `log_prior` is not `[m]`.
    pub fn best_path_from(
        &mut self,
        log_prior: Option<&[f32]>,
        log_s: &[f32],
        log_q: &[f32],
        m: usize,
    ) -> Result<ViterbiPath> {
        if m == 0
            || log_s.is_empty()
            || !log_s.len().is_multiple_of(m)
            || log_q.len() != m * m
            || log_prior.is_some_and(|p| p.len() != m)
        {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "viterbi over {m} states: log_s has {} values (want steps × {m}), \
                     log_q {} (want {}), log_prior {:?} (want {m})",
                    log_s.len(),
                    log_q.len(),
                    m * m,
                    log_prior.map(<[f32]>::len)
                ),
            });
        }
        let steps = log_s.len() / m;
        self.delta.clear();
        self.delta.extend_from_slice(&log_s[..m]);
        if let Some(prior) = log_prior {
            for (d, p) in self.delta.iter_mut().zip(prior) {
                *d += p;
            }
        }
        self.psi.clear();
        self.psi.resize(steps * m, 0);
        for t in 1..steps {
            self.next.clear();
            for j in 0..m {
                let (mut best, mut arg) = (f32::NEG_INFINITY, 0);
                for (i, &d) in self.delta.iter().enumerate() {
                    let score = d + log_q[i * m + j];
                    if score > best {
                        (best, arg) = (score, i);
                    }
                }
                self.psi[t * m + j] = arg as u32;
                self.next.push(best + log_s[t * m + j]);
            }
            std::mem::swap(&mut self.delta, &mut self.next);
        }
        let (mut log_score, mut last) = (f32::NEG_INFINITY, 0);
        for (j, &d) in self.delta.iter().enumerate() {
            if d > log_score {
                (log_score, last) = (d, j);
            }
        }
        let mut states = vec![0; steps];
        states[steps - 1] = last;
        for t in (1..steps).rev() {
            states[t - 1] = self.psi[t * m + states[t]] as usize;
        }
        Ok(ViterbiPath { states, log_score })
    }
}

/// Makes candidate `last` final in a lattice of `m` states: a path that reaches it ends there.
/// Adds one state, index `m` ("after the end"): only `last` leads to it (and only to it), it
/// leads only to itself, and it scores 0 at every step but the first, where it is impossible.
/// A path's score is then its score up to and including `last`, so a block that ends early
/// competes with full-length blocks on the probability of what it emits, as AR decoding would
/// see it. Without this, end-of-sequence inside a block pays for the steps after it (the
/// heads' scores there, and transitions out of it, which training data never has) and the
/// path search avoids it.
///
/// # Shapes
/// - `log_s`: `[steps, m]` → `[steps, m + 1]`; `log_q`: `[m, m]` → `[m + 1, m + 1]`;
///   `log_prior`: `[m]` → `[m + 1]`
pub fn absorb_after(
    last: usize,
    log_s: &mut Vec<f32>,
    log_q: &mut Vec<f32>,
    log_prior: Option<&mut Vec<f32>>,
    m: usize,
) {
    // Widen the row-major rows in place, last row first (a row only moves up, over rows
    // already moved), so the decoder's buffers are reused rather than reallocated per step.
    let steps = log_s.len() / m.max(1);
    log_s.resize(steps * (m + 1), 0.0);
    for t in (0..steps).rev() {
        log_s.copy_within(t * m..(t + 1) * m, t * (m + 1));
        log_s[t * (m + 1) + m] = if t == 0 { f32::NEG_INFINITY } else { 0.0 };
    }
    log_q.resize((m + 1) * (m + 1), 0.0);
    for i in (0..m).rev() {
        let row = i * (m + 1);
        log_q.copy_within(i * m..(i + 1) * m, row);
        log_q[row + m] = f32::NEG_INFINITY;
    }
    let last_row = last * (m + 1);
    log_q[last_row..last_row + m].fill(f32::NEG_INFINITY);
    log_q[last_row + m] = 0.0;
    log_q[m * (m + 1)..].fill(f32::NEG_INFINITY);
    log_q[m * (m + 1) + m] = 0.0;
    if let Some(prior) = log_prior {
        prior.push(f32::NEG_INFINITY);
    }
}

/// The log score of one path, `log S_1(s_1) + Σ_t [log Q(s_{t-1}, s_t) + log S_t(s_t)]`, in the
/// layout of [`Viterbi::best_path`]: what Viterbi maximises.
pub fn path_log_score(log_s: &[f32], log_q: &[f32], m: usize, states: &[usize]) -> f32 {
    let mut score = 0.0;
    for (t, &s) in states.iter().enumerate() {
        score += log_s[t * m + s];
        if t > 0 {
            score += log_q[states[t - 1] * m + s];
        }
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn union_keeps_first_appearance_order() {
        let per_head = vec![vec![5, 2, 9], vec![2, 7, 5], vec![1]];
        assert_eq!(union_candidates(&per_head), vec![5, 2, 9, 7, 1]);
    }

    #[test]
    fn one_step_is_the_argmax() {
        let mut v = Viterbi::new();
        let path = v
            .best_path(&[-2.0, -0.5, -0.5, -3.0], &[0.0; 16], 4)
            .unwrap();
        assert_eq!(path.states, vec![1]);
        assert_eq!(path.log_score, -0.5);
    }

    #[test]
    fn transitions_can_overrule_a_head() {
        // Two states; head 2 slightly prefers state 0, but 1 → 0 is nearly impossible.
        let log_s = [0.9f32.ln(), 0.1f32.ln(), 0.55f32.ln(), 0.45f32.ln()];
        let uniform = [0.5f32.ln(); 4];
        let mut v = Viterbi::new();
        assert_eq!(v.best_path(&log_s, &uniform, 2).unwrap().states, vec![0, 0]);
        let sticky = [0.01f32.ln(), 0.99f32.ln(), 0.99f32.ln(), 0.01f32.ln()];
        let path = v.best_path(&log_s, &sticky, 2).unwrap();
        assert_eq!(path.states, vec![0, 1]);
        let expected = path_log_score(&log_s, &sticky, 2, &[0, 1]);
        assert!((path.log_score - expected).abs() < 1e-6);
    }

    /// The best score over every path of `steps` states when a path ends at its first `last`.
    fn brute_force_truncated(log_s: &[f32], log_q: &[f32], m: usize, last: usize) -> f32 {
        let steps = log_s.len() / m;
        let mut best = f32::NEG_INFINITY;
        for code in 0..m.pow(steps as u32) {
            let path: Vec<usize> = (0..steps).map(|t| (code / m.pow(t as u32)) % m).collect();
            let end = path
                .iter()
                .position(|&s| s == last)
                .map_or(steps, |p| p + 1);
            let score = path_log_score(&log_s[..end * m], log_q, m, &path[..end]);
            best = best.max(score);
        }
        best
    }

    #[test]
    fn an_absorbing_end_is_reached_where_the_heads_want_it() {
        // Three states, state 2 the end. Head 1 is sure of the end at step 2, but no data ever
        // leaves it (log Q(2 → ·) very low): the plain search runs past it, the absorbing one
        // stops there.
        let p = |x: f32| x.ln();
        let log_s = vec![
            p(0.9),
            p(0.05),
            p(0.05), // step 1
            p(0.02),
            p(0.03),
            p(0.95), // step 2
            p(0.5),
            p(0.45),
            p(0.05), // step 3
        ];
        let mut log_q = vec![
            p(0.3),
            p(0.3),
            p(0.4),
            p(0.3),
            p(0.3),
            p(0.4),
            p(1e-6),
            p(1e-6),
            p(1e-6),
        ];
        let mut v = Viterbi::new();
        let plain = v.best_path(&log_s, &log_q, 3).unwrap();
        assert_ne!(plain.states[1], 2, "{plain:?}");
        let mut log_s = log_s;
        absorb_after(2, &mut log_s, &mut log_q, None, 3);
        let path = v.best_path(&log_s, &log_q, 4).unwrap();
        assert_eq!(path.states, vec![0, 2, 3]);
        let want = p(0.9) + p(0.4) + p(0.95);
        assert!((path.log_score - want).abs() < 1e-5);
    }

    #[test]
    fn the_absorbing_search_equals_brute_force() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut v = Viterbi::new();
        for case in 0..200 {
            let (m, steps) = (1 + case % 4, 1 + case % 5);
            let last = case % m;
            let mut draw =
                |n: usize| -> Vec<f32> { (0..n).map(|_| -5.0 * rng.random::<f32>()).collect() };
            let (log_s, log_q) = (draw(steps * m), draw(m * m));
            let want = brute_force_truncated(&log_s, &log_q, m, last);
            let (mut s, mut q) = (log_s.clone(), log_q.clone());
            absorb_after(last, &mut s, &mut q, None, m);
            let path = v.best_path(&s, &q, m + 1).unwrap();
            assert!(
                (path.log_score - want).abs() < 1e-4,
                "case {case}: {path:?} vs {want}"
            );
            // The path reaches "after the end" only through `last`, and then stays there.
            for t in 1..steps {
                if path.states[t] == m {
                    assert!(path.states[t - 1] == last || path.states[t - 1] == m);
                }
            }
        }
    }

    #[test]
    fn shapes_are_checked() {
        let mut v = Viterbi::new();
        assert!(v.best_path(&[0.0; 5], &[0.0; 4], 2).is_err());
        assert!(v.best_path(&[0.0; 4], &[0.0; 3], 2).is_err());
        assert!(v.best_path(&[], &[], 0).is_err());
        assert!(ViterbiConfig::new(0).validate().is_err());
    }
}
