//! Turning logits into tokens: temperature, repetition penalty, top-k, top-p (nucleus) and
//! CosyVoice-style repetition-aware sampling (RAS), with a seeded RNG per sequence.
//!
//! [`SamplerConfig::distribution`] gives the exact distribution a token is drawn from; the
//! speculative verifiers compare these distributions for target and draft, so both sides see the
//! same warping. Temperature 0 is greedy: the distribution is one-hot on the first argmax.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{InferError, Result};
use crate::fastexp::{exp_shifted, finite_max, sum_f64};

/// Repetition-aware sampling (CosyVoice, Du et al. 2024): when the token drawn already fills at
/// least `window · ratio` of the last `window` tokens, draw again from the unfiltered
/// distribution (temperature only), which breaks loops on silence or a repeated unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RasConfig {
    /// Tokens of history looked at.
    pub window: usize,
    /// Share of the window a token may fill before it is redrawn.
    pub ratio: f32,
}

impl Default for RasConfig {
    fn default() -> Self {
        Self {
            window: 10,
            ratio: 0.1,
        }
    }
}

/// How a token is chosen from logits. The default is plain sampling at temperature 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; 0 is greedy (argmax).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens (0 keeps all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose mass reaches `top_p` (1 keeps all).
    pub top_p: f32,
    /// CTRL-style penalty > 1 on tokens seen in the last `repetition_window` tokens: positive
    /// logits are divided by it, negative ones multiplied (1 disables).
    pub repetition_penalty: f32,
    /// History the repetition penalty looks at.
    pub repetition_window: usize,
    /// Repetition-aware resampling, if on.
    pub ras: Option<RasConfig>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            repetition_penalty: 1.0,
            repetition_window: 64,
            ras: None,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding (temperature 0).
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::default()
        }
    }

    /// Whether this config is greedy.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// Checks every field's range.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, value: String, expected: &str| {
            Err(InferError::InvalidSetting {
                name,
                value,
                expected: expected.into(),
            })
        };
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "temperature",
                self.temperature.to_string(),
                "finite and >= 0",
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p.to_string(), "in (0, 1]");
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty >= 1.0) {
            return bad(
                "repetition_penalty",
                self.repetition_penalty.to_string(),
                "finite and >= 1",
            );
        }
        if let Some(ras) = self.ras
            && (ras.window == 0 || !(ras.ratio > 0.0 && ras.ratio <= 1.0))
        {
            return bad(
                "ras",
                format!("window {} ratio {}", ras.window, ras.ratio),
                "window >= 1 and ratio in (0, 1]",
            );
        }
        Ok(())
    }

    /// The distribution the next token is drawn from, given the sequence's `history` of
    /// generated tokens; `banned` (e.g. end-of-sequence before the minimum length) gets
    /// probability 0. Sums to 1; one-hot on the first maximum when greedy.
    pub fn distribution(&self, logits: &[f32], history: &[u32], banned: Option<u32>) -> Vec<f32> {
        let scores = self.penalised(logits, history, banned);
        if self.is_greedy() {
            let mut probs = vec![0.0; scores.len()];
            probs[argmax(&scores) as usize] = 1.0;
            return probs;
        }
        self.truncate(softmax(&scores, self.temperature))
    }

    /// The scores after the repetition penalty, with `banned` at −∞: what temperature and the
    /// top-k / top-p filters apply to.
    pub fn penalised(&self, logits: &[f32], history: &[u32], banned: Option<u32>) -> Vec<f32> {
        let mut scores = logits.to_vec();
        if self.repetition_penalty > 1.0 {
            let start = history.len().saturating_sub(self.repetition_window);
            let mut seen = vec![false; scores.len()];
            for &t in &history[start..] {
                if let Some(s) = seen.get_mut(t as usize) {
                    *s = true;
                }
            }
            for (score, seen) in scores.iter_mut().zip(seen) {
                if seen {
                    *score = if *score > 0.0 {
                        *score / self.repetition_penalty
                    } else {
                        *score * self.repetition_penalty
                    };
                }
            }
        }
        if let Some(slot) = banned.and_then(|t| scores.get_mut(t as usize)) {
            *slot = f32::NEG_INFINITY;
        }
        scores
    }

    /// Applies top-k then top-p to a distribution and renormalises it when either cut
    /// something (a softmax is normalised already).
    fn truncate(&self, mut probs: Vec<f32>) -> Vec<f32> {
        let by_k = self.top_k > 0 && self.top_k < probs.len();
        if !by_k && self.top_p >= 1.0 {
            // Nothing cut: the softmax is normalised already.
            return probs;
        }
        if by_k {
            let mut keep = vec![false; probs.len()];
            for i in top_k_indices(&probs, self.top_k) {
                keep[i as usize] = true;
            }
            for (p, keep) in probs.iter_mut().zip(keep) {
                if !keep {
                    *p = 0.0;
                }
            }
        }
        if self.top_p < 1.0 {
            // Only tokens still possible compete (after top-k, often a handful).
            let mut order: Vec<usize> = (0..probs.len()).filter(|&i| probs[i] > 0.0).collect();
            order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
            let total: f32 = probs.iter().sum();
            let mut mass = 0.0;
            let mut keep = order.len();
            for (n, &i) in order.iter().enumerate() {
                mass += probs[i] / total;
                if mass >= self.top_p {
                    keep = n + 1;
                    break;
                }
            }
            for &i in &order[keep..] {
                probs[i] = 0.0;
            }
        }
        normalize(&mut probs);
        probs
    }

    /// Draws the next token: from [`distribution`](Self::distribution), redrawn from the
    /// temperature-only distribution when repetition-aware sampling rejects it.
    pub fn draw(
        &self,
        logits: &[f32],
        history: &[u32],
        banned: Option<u32>,
        rng: &mut StdRng,
    ) -> u32 {
        let probs = self.distribution(logits, history, banned);
        self.draw_from(&probs, logits, history, banned, rng)
    }

    /// [`draw`](Self::draw) with the distribution already computed (`probs` must be
    /// `self.distribution(logits, history, banned)`): the same token from the same stream.
    pub fn draw_from(
        &self,
        probs: &[f32],
        logits: &[f32],
        history: &[u32],
        banned: Option<u32>,
        rng: &mut StdRng,
    ) -> u32 {
        let token = sample(probs, rng);
        match self.ras {
            Some(ras) if !self.is_greedy() => {
                let start = history.len().saturating_sub(ras.window);
                let repeats = history[start..].iter().filter(|&&t| t == token).count();
                if repeats as f32 >= ras.window as f32 * ras.ratio {
                    let plain = SamplerConfig {
                        temperature: self.temperature,
                        ..SamplerConfig::default()
                    };
                    sample(&plain.distribution(logits, &[], banned), rng)
                } else {
                    token
                }
            }
            _ => token,
        }
    }
}

/// The random stream of one sequence.
pub fn seeded_rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// Index of the first maximum (0 for an empty slice; NaN never wins).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] || values[best].is_nan() {
            best = i;
        }
    }
    best as u32
}

/// The indices of the `k` largest values, largest first, ties to the lower index; O(n + k log k).
pub fn top_k_indices(values: &[f32], k: usize) -> Vec<u32> {
    let k = k.min(values.len());
    if k == 0 {
        return Vec::new();
    }
    let order = |a: &u32, b: &u32| {
        values[*b as usize]
            .total_cmp(&values[*a as usize])
            .then(a.cmp(b))
    };
    let mut indices: Vec<u32> = (0..values.len() as u32).collect();
    if k < indices.len() {
        indices.select_nth_unstable_by(k - 1, order);
        indices.truncate(k);
    }
    indices.sort_unstable_by(order);
    indices
}

/// Softmax of `logits / temperature` (temperature > 0), computed stably: shifted by the
/// maximum, [`fastexp::exp`](crate::fastexp::exp) (relative error < 3e-7; a shifted score below
/// −87.3, −∞ among them, gives 0), the sum in f64.
pub fn softmax(logits: &[f32], temperature: f32) -> Vec<f32> {
    let t = f64::from(temperature);
    let max = finite_max(logits);
    if !max.is_finite() {
        // Nothing finite: uniform over the finite-or-not entries that are not -inf.
        let mut probs: Vec<f32> = logits
            .iter()
            .map(|&v| if v == f32::NEG_INFINITY { 0.0 } else { 1.0 })
            .collect();
        normalize(&mut probs);
        return probs;
    }
    let inv_t = (1.0 / t) as f32;
    let mut probs = vec![0.0f32; logits.len()];
    let total = exp_shifted(logits, max, inv_t, &mut probs);
    let inv_total = (1.0 / total) as f32;
    for p in &mut probs {
        *p *= inv_total;
    }
    probs
}

/// Log-softmax of `logits / temperature` (temperature > 0), computed stably (as [`softmax`]); −∞ stays
/// −∞. When no entry is finite, every entry that is not −∞ gets the same finite value.
pub fn log_softmax(logits: &[f32], temperature: f32) -> Vec<f32> {
    let mut out = vec![0.0f32; logits.len()];
    match log_normalizer(logits, temperature, &mut out) {
        Some(norm) => {
            for (o, &v) in out.iter_mut().zip(logits) {
                *o = norm.log_prob(v);
            }
            out
        }
        None => softmax(logits, temperature)
            .into_iter()
            .map(|p| if p > 0.0 { p.ln() } else { f32::NEG_INFINITY })
            .collect(),
    }
}

/// What turns a score into its log-softmax probability: `(v − max) · inv_t − log_total`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogNormalizer {
    max: f32,
    inv_t: f32,
    log_total: f32,
}

impl LogNormalizer {
    /// The log-probability of score `v` (one of the scores the normalizer was computed from).
    pub fn log_prob(&self, v: f32) -> f32 {
        (v - self.max) * self.inv_t - self.log_total
    }
}

/// The [`LogNormalizer`] of `logits / temperature` (one exponential pass into `scratch`, which
/// must hold `logits.len()` values), so that only the entries a caller needs are turned into
/// log-probabilities; [`log_softmax`] is `log_prob` of every entry. `None` when no entry is
/// finite (see [`log_softmax`] for that case).
///
/// # Panics
/// When `scratch` is shorter than `logits`.
pub fn log_normalizer(
    logits: &[f32],
    temperature: f32,
    scratch: &mut [f32],
) -> Option<LogNormalizer> {
    let max = finite_max(logits);
    if !max.is_finite() {
        return None;
    }
    let inv_t = (1.0 / f64::from(temperature)) as f32;
    let total = exp_shifted(logits, max, inv_t, &mut scratch[..logits.len()]);
    Some(LogNormalizer {
        max,
        inv_t,
        log_total: total.ln() as f32,
    })
}

/// Scales `probs` to sum to 1 (left as is when the sum is 0).
pub fn normalize(probs: &mut [f32]) {
    let total = sum_f64(probs);
    if total > 0.0 {
        // One division, then products (a division per value cost more than the draw itself).
        let inv = 1.0 / total;
        for p in probs.iter_mut() {
            *p = (f64::from(*p) * inv) as f32;
        }
    }
}

/// Draws an index from a distribution summing to 1 by inverting its CDF with one uniform draw.
/// Zero-probability entries are never drawn.
pub fn sample(probs: &[f32], rng: &mut StdRng) -> u32 {
    sample_scaled(probs, 1.0, rng)
}

/// [`sample`] from weights that sum to `mass` (> 0) instead of 1: the uniform draw is scaled
/// by it, so a distribution with entries removed need not be renormalised first.
pub fn sample_scaled(probs: &[f32], mass: f64, rng: &mut StdRng) -> u32 {
    let u: f64 = rng.random::<f64>() * mass;
    let mut acc = 0.0f64;
    let mut last_positive = 0;
    for (i, &p) in probs.iter().enumerate() {
        if p > 0.0 {
            acc += f64::from(p);
            last_positive = i;
            if u < acc {
                return i as u32;
            }
        }
    }
    last_positive as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_is_one_hot_on_first_max() {
        let p = SamplerConfig::greedy().distribution(&[0.5, 2.0, 2.0, -1.0], &[], None);
        assert_eq!(p, vec![0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn banned_token_never_drawn() {
        let cfg = SamplerConfig::greedy();
        let p = cfg.distribution(&[0.5, 2.0, 1.0], &[], Some(1));
        assert_eq!(p, vec![0.0, 0.0, 1.0]);
    }

    #[test]
    fn top_k_and_top_p_keep_the_head() {
        let logits = [3.0, 2.0, 1.0, 0.0];
        let k = SamplerConfig {
            top_k: 2,
            ..SamplerConfig::default()
        }
        .distribution(&logits, &[], None);
        assert!(k[2] == 0.0 && k[3] == 0.0 && (k[0] + k[1] - 1.0).abs() < 1e-6);
        // softmax ≈ [0.644, 0.237, 0.087, 0.032]: 0.9 needs three tokens
        let p = SamplerConfig {
            top_p: 0.9,
            ..SamplerConfig::default()
        }
        .distribution(&logits, &[], None);
        assert!(p[2] > 0.0 && p[3] == 0.0);
    }

    #[test]
    fn repetition_penalty_lowers_seen_tokens() {
        let cfg = SamplerConfig {
            repetition_penalty: 2.0,
            ..SamplerConfig::default()
        };
        let plain = SamplerConfig::default().distribution(&[1.0, 1.0], &[], None);
        let penalised = cfg.distribution(&[1.0, 1.0], &[0], None);
        assert!((plain[0] - 0.5).abs() < 1e-6);
        assert!(penalised[0] < 0.5 && penalised[1] > 0.5);
    }

    #[test]
    fn sampling_matches_the_distribution() {
        let probs = [0.1f32, 0.0, 0.6, 0.3];
        let mut rng = seeded_rng(7);
        let n = 200_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[sample(&probs, &mut rng) as usize] += 1;
        }
        assert_eq!(counts[1], 0);
        for (c, p) in counts.iter().zip(probs) {
            assert!((*c as f32 / n as f32 - p).abs() < 0.005, "{counts:?}");
        }
    }

    #[test]
    fn ras_redraws_a_looping_token() {
        // Token 0 dominates; with it filling the window, RAS redraws from the plain softmax,
        // which (at a high temperature) spreads mass to the others.
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 1,
            ras: Some(RasConfig::default()),
            ..SamplerConfig::default()
        };
        let logits = [1.0, 0.9, 0.8];
        let mut rng = seeded_rng(1);
        let others = (0..1000)
            .filter(|_| cfg.draw(&logits, &[0; 10], None, &mut rng) != 0)
            .count();
        assert!(others > 400, "{others}");
        let mut rng = seeded_rng(1);
        assert!((0..100).all(|_| cfg.draw(&logits, &[1; 10], None, &mut rng) == 0));
    }

    #[test]
    fn top_k_indices_are_sorted_with_ties_to_the_lower_index() {
        let v = [0.5, 2.0, -1.0, 2.0, 1.0];
        assert_eq!(top_k_indices(&v, 3), vec![1, 3, 4]);
        assert_eq!(top_k_indices(&v, 9), vec![1, 3, 4, 0, 2]);
        assert!(top_k_indices(&v, 0).is_empty());
    }

    #[test]
    fn log_softmax_matches_softmax() {
        let logits = [1.5, -0.5, f32::NEG_INFINITY, 3.0];
        let p = softmax(&logits, 0.7);
        let lp = log_softmax(&logits, 0.7);
        assert_eq!(lp[2], f32::NEG_INFINITY);
        for (p, lp) in p.iter().zip(&lp) {
            assert!((p - lp.exp()).abs() < 1e-6, "{p} vs {lp}");
        }
    }

    #[test]
    fn invalid_settings_are_named() {
        let err = SamplerConfig {
            top_p: 0.0,
            ..SamplerConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("top_p"));
    }
}
