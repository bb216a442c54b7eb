//! Distribution tests of the verifier on a fixed toy target/draft pair with fixed seeds.
//!
//! Each check draws `n ≥ 100,000` samples and compares the empirical distribution with the one
//! theory promises, in total variation. The bound is 3x the expected TV of `n` exact samples,
//! `E[TV] ≈ ½ Σ_v sqrt(p_v (1 − p_v) / n) · sqrt(2/π)` (mean absolute deviation of a normal
//! approximation of each count). Deliberately broken verifiers (accept always, wrong draft
//! probabilities) must fail the same check, so the check has the power to fail.

use std::sync::Arc;

use rand::rngs::StdRng;
use voxspec_infer::sampler::{sample, seeded_rng};
use voxspec_infer::verify::{MAX_THINNING_TRIALS, Verdict};
use voxspec_infer::{AcceptanceRule, SimilarityGroups, acceptance_probability, verify};

const N: usize = 120_000;

/// Target distributions q_0..q_3 (γ = 3 plus the bonus) over 8 tokens.
fn target() -> Vec<Vec<f32>> {
    vec![
        vec![0.30, 0.05, 0.20, 0.05, 0.15, 0.10, 0.05, 0.10],
        vec![0.05, 0.40, 0.05, 0.20, 0.05, 0.05, 0.15, 0.05],
        vec![0.10, 0.10, 0.10, 0.10, 0.30, 0.10, 0.10, 0.10],
        vec![0.02, 0.08, 0.30, 0.10, 0.10, 0.20, 0.10, 0.10],
    ]
}

/// Draft distributions p_0..p_2: related to the target but clearly off (TV 0.3–0.4).
fn draft() -> Vec<Vec<f32>> {
    vec![
        vec![0.05, 0.30, 0.05, 0.30, 0.05, 0.10, 0.10, 0.05],
        vec![0.20, 0.20, 0.20, 0.05, 0.20, 0.05, 0.05, 0.05],
        vec![0.25, 0.05, 0.05, 0.25, 0.10, 0.10, 0.10, 0.10],
    ]
}

/// Overlapping groups over the 8 tokens (N(t) from 1 to 3).
fn groups() -> Arc<SimilarityGroups> {
    let lists = [
        vec![0, 1, 2],
        vec![1, 2, 3],
        vec![3, 4],
        vec![4, 5, 6],
        vec![6, 7],
        vec![0, 7],
        vec![5],
    ];
    Arc::new(SimilarityGroups::from_lists(8, 0.45, &lists).unwrap())
}

fn tv(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0
}

/// Expected TV between `probs` and the empirical distribution of `n` samples from it.
fn noise_tv(probs: &[f64], n: usize) -> f64 {
    let n = n as f64;
    probs
        .iter()
        .map(|&p| (p * (1.0 - p) / n).sqrt())
        .sum::<f64>()
        * (2.0 / std::f64::consts::PI).sqrt()
        / 2.0
}

fn empirical(counts: &[usize]) -> (Vec<f64>, usize) {
    let n: usize = counts.iter().sum();
    (counts.iter().map(|&c| c as f64 / n as f64).collect(), n)
}

/// `(tv, 3 · expected noise tv)` of `counts` against `expected`.
fn check(counts: &[usize], expected: &[f64]) -> (f64, f64) {
    let (emp, n) = empirical(counts);
    (tv(&emp, expected), 3.0 * noise_tv(expected, n))
}

fn to_f64(p: &[f32]) -> Vec<f64> {
    p.iter().map(|&v| f64::from(v)).collect()
}

/// Runs `N` verifications, drafting `x_i ~ p_true[i]` but handing the verifier `p_claimed`.
fn run(
    rule: &AcceptanceRule,
    p_true: &[Vec<f32>],
    p_claimed: &[Vec<f32>],
    q: &[Vec<f32>],
    seed: u64,
) -> Vec<(Vec<u32>, Verdict)> {
    let mut rng: StdRng = seeded_rng(seed);
    (0..N)
        .map(|_| {
            let drafts: Vec<u32> = p_true.iter().map(|p| sample(p, &mut rng)).collect();
            let v = verify(rule, &drafts, p_claimed, q, &mut rng).unwrap();
            (drafts, v)
        })
        .collect()
}

/// Per block position j: counts of the token emitted at j among blocks that reach j.
fn position_counts(results: &[(Vec<u32>, Verdict)], vocab: usize) -> Vec<Vec<usize>> {
    let gamma = results[0].0.len();
    let mut counts = vec![vec![0usize; vocab]; gamma + 1];
    for (drafts, v) in results {
        for (j, &x) in drafts.iter().enumerate().take(v.accepted) {
            counts[j][x as usize] += 1;
        }
        counts[v.accepted][v.next as usize] += 1;
    }
    counts
}

/// Worst (tv / bound) over the block positions that got at least 10,000 samples.
fn worst_ratio(results: &[(Vec<u32>, Verdict)], q: &[Vec<f32>]) -> f64 {
    let counts = position_counts(results, q[0].len());
    let mut worst: f64 = 0.0;
    for (j, c) in counts.iter().enumerate() {
        if c.iter().sum::<usize>() < 10_000 {
            continue;
        }
        let (d, bound) = check(c, &to_f64(&q[j]));
        worst = worst.max(d / bound);
    }
    worst
}

#[test]
fn exact_verifier_follows_the_target_at_every_position() {
    let (q, p) = (target(), draft());
    let results = run(&AcceptanceRule::Exact, &p, &p, &q, 11);
    let counts = position_counts(&results, 8);
    // Position 0 always; later positions conditioned on the block reaching them.
    for (j, c) in counts.iter().enumerate() {
        let reached: usize = c.iter().sum();
        assert!(reached >= 10_000, "position {j} reached {reached} times");
        let (d, bound) = check(c, &to_f64(&q[j]));
        eprintln!("exact, position {j}: {reached} samples, tv {d:.5}, bound {bound:.5}");
        assert!(d < bound, "position {j}: tv {d:.5} >= bound {bound:.5}");
    }
    // The measured acceptance rate at position 0 matches 1 − TV(p_0, q_0).
    let alpha = acceptance_probability(&AcceptanceRule::Exact, &p[0], &q[0]).unwrap();
    let kept = results.iter().filter(|(_, v)| v.accepted >= 1).count() as f64 / N as f64;
    assert!((kept - alpha).abs() < 0.01, "kept {kept}, alpha {alpha}");
}

#[test]
fn broken_verifiers_fail_the_same_check() {
    let (q, p) = (target(), draft());
    assert!(worst_ratio(&run(&AcceptanceRule::Exact, &p, &p, &q, 12), &q) < 1.0);
    // Accept always: β = 1 keeps every draft the target can emit.
    let always = worst_ratio(
        &run(&AcceptanceRule::Tolerance { beta: 1.0 }, &p, &p, &q, 12),
        &q,
    );
    eprintln!("tv / bound: accept-always {always:.2}");
    assert!(always > 1.0, "accept-always passed: ratio {always}");
    // Wrong draft probabilities: drafts from p, ratios computed with a uniform p.
    let uniform = vec![vec![0.125f32; 8]; 3];
    let wrong = worst_ratio(&run(&AcceptanceRule::Exact, &p, &uniform, &q, 12), &q);
    eprintln!("tv / bound: wrong draft probabilities {wrong:.2}");
    assert!(wrong > 1.0, "wrong-p verifier passed: ratio {wrong}");
    // SSD with β > 0 is deliberately not exact either.
    let ssd = worst_ratio(
        &run(&AcceptanceRule::Tolerance { beta: 0.3 }, &p, &p, &q, 12),
        &q,
    );
    eprintln!("tv / bound: ssd beta 0.3 {ssd:.2}");
    assert!(ssd > 1.0, "ssd β = 0.3 passed: ratio {ssd}");
}

#[test]
fn tolerance_zero_equals_exact() {
    let (q, p) = (target(), draft());
    let exact = run(&AcceptanceRule::Exact, &p, &p, &q, 13);
    let ssd0 = run(&AcceptanceRule::Tolerance { beta: 0.0 }, &p, &p, &q, 13);
    assert_eq!(exact, ssd0);
    assert!(worst_ratio(&ssd0, &q) < 1.0);
}

/// Counts of the group emitted at block position 0.
fn first_group_counts(results: &[(Vec<u32>, Verdict)], n_groups: usize) -> Vec<usize> {
    let mut counts = vec![0usize; n_groups];
    for (_, v) in results {
        counts[v.groups[0] as usize] += 1;
    }
    counts
}

#[test]
fn pcg_emits_groups_distributed_as_q_c() {
    let (q, p) = (target(), draft());
    let g = groups();
    let rule = AcceptanceRule::Groups(g.clone());
    let qc0 = g.coarse_distribution(&q[0]);
    let results = run(&rule, &p, &p, &q, 21);
    for (_, v) in &results {
        assert_eq!(v.groups.len(), v.accepted + 1);
    }
    let (d, bound) = check(&first_group_counts(&results, g.n_groups()), &qc0);
    eprintln!("pcg groups vs Q_c: tv {d:.5}, bound {bound:.5}");
    assert!(d < bound, "tv {d:.5} >= bound {bound:.5}");
    // Groups make acceptance easier than exact matching on this pair.
    let kept_pcg = results.iter().filter(|(_, v)| v.accepted >= 1).count();
    let alpha = acceptance_probability(&rule, &p[0], &q[0]).unwrap();
    assert!((kept_pcg as f64 / N as f64 - alpha).abs() < 0.01);
    assert!(alpha > acceptance_probability(&AcceptanceRule::Exact, &p[0], &q[0]).unwrap());

    // Broken: the verifier is told p = q (it then accepts every group) ...
    let always = run(&rule, &p, &q[..3], &q, 21);
    let (d, bound) = check(&first_group_counts(&always, g.n_groups()), &qc0);
    eprintln!("pcg accept-always: tv {d:.5}, bound {bound:.5}");
    assert!(
        d > bound,
        "accept-always PCG passed: tv {d:.5}, bound {bound:.5}"
    );
    // ... or a uniform p.
    let uniform = vec![vec![0.125f32; 8]; 3];
    let wrong = run(&rule, &p, &uniform, &q, 21);
    let (d, bound) = check(&first_group_counts(&wrong, g.n_groups()), &qc0);
    eprintln!("pcg wrong draft probabilities: tv {d:.5}, bound {bound:.5}");
    assert!(d > bound, "wrong-p PCG passed: tv {d:.5}, bound {bound:.5}");
}

#[test]
fn pcg_thinning_takes_one_over_tv_trials_and_the_fallback_is_exact() {
    let g = groups();
    let rule = AcceptanceRule::Groups(g.clone());
    let q = target();
    let p = draft();
    let (pc, qc) = (g.coarse_distribution(&p[0]), g.coarse_distribution(&q[0]));
    let tv_c = tv(&pc, &qc);
    let results = run(&rule, &p[..1], &p[..1], &q[..2], 31);
    let rejected: Vec<&Verdict> = results
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v.accepted == 0)
        .collect();
    let trials: usize = rejected.iter().map(|v| v.trials).sum();
    let mean = trials as f64 / rejected.len() as f64;
    eprintln!(
        "pcg thinning: {mean:.3} trials per rejection, 1/TV(P_c, Q_c) = {:.3}",
        1.0 / tv_c
    );
    assert!(
        (mean * tv_c - 1.0).abs() < 0.05,
        "mean trials {mean}, 1/TV = {}",
        1.0 / tv_c
    );

    // A pair whose coarse distributions nearly agree: thinning often exhausts its trials and
    // the enumeration takes over. Conditioned on rejection, the emitted group must follow the
    // residual [Q_c − P_c]_+ / TV.
    let q_near = vec![vec![0.125f32; 8], vec![0.125f32; 8]];
    // p − q = [3, −1, 1, −2, 0, 2, −2, −1] / 100: TV(P_c, Q_c) = 0.035 over three groups.
    let p_near = vec![vec![
        0.155f32, 0.115, 0.135, 0.105, 0.125, 0.145, 0.105, 0.115,
    ]];
    let (pc, qc) = (
        g.coarse_distribution(&p_near[0]),
        g.coarse_distribution(&q_near[0]),
    );
    let residual: Vec<f64> = pc.iter().zip(&qc).map(|(p, q)| (q - p).max(0.0)).collect();
    let total: f64 = residual.iter().sum();
    let residual: Vec<f64> = residual.iter().map(|r| r / total).collect();
    let mut rng = seeded_rng(32);
    let mut counts = vec![0usize; g.n_groups()];
    let (mut rejections, mut fallbacks) = (0, 0);
    while rejections < 3_000 {
        let x = sample(&p_near[0], &mut rng);
        let v = verify(&rule, &[x], &p_near, &q_near, &mut rng).unwrap();
        if v.accepted == 0 {
            rejections += 1;
            fallbacks += usize::from(v.fallback);
            assert!(v.trials <= MAX_THINNING_TRIALS);
            counts[v.groups[0] as usize] += 1;
        }
    }
    assert!(fallbacks > 100, "only {fallbacks} fallbacks");
    eprintln!("near pair: {fallbacks} fallbacks in {rejections} rejections");
    let (d, bound) = check(&counts, &residual);
    assert!(d < bound, "residual tv {d:.5} >= bound {bound:.5}");
}

/// Per block position j: counts of the group emitted at j among blocks that reach j.
fn position_group_counts(results: &[(Vec<u32>, Verdict)], n_groups: usize) -> Vec<Vec<usize>> {
    let gamma = results[0].0.len();
    let mut counts = vec![vec![0usize; n_groups]; gamma + 1];
    for (_, v) in results {
        for (j, &k) in v.groups.iter().enumerate() {
            counts[j][k as usize] += 1;
        }
    }
    counts
}

/// Worst (tv / bound) of the group law over the block positions reached ≥ 10,000 times.
fn worst_group_ratio(results: &[(Vec<u32>, Verdict)], g: &SimilarityGroups, q: &[Vec<f32>]) -> f64 {
    let mut worst: f64 = 0.0;
    for (j, c) in position_group_counts(results, g.n_groups())
        .iter()
        .enumerate()
    {
        if c.iter().sum::<usize>() < 10_000 {
            continue;
        }
        let (d, bound) = check(c, &g.coarse_distribution(&q[j]));
        worst = worst.max(d / bound);
    }
    worst
}

#[test]
fn pcg_group_law_holds_at_every_position_and_on_rejection() {
    let (q, p) = (target(), draft());
    let g = groups();
    let rule = AcceptanceRule::Groups(g.clone());
    let results = run(&rule, &p, &p, &q, 41);
    // Every position, the later ones conditioned on the block reaching them (γ = 3 + bonus).
    let counts = position_group_counts(&results, g.n_groups());
    for (j, c) in counts.iter().enumerate() {
        let reached: usize = c.iter().sum();
        assert!(reached >= 10_000, "position {j} reached {reached} times");
        let (d, bound) = check(c, &g.coarse_distribution(&q[j]));
        eprintln!("pcg position {j}: {reached} samples, tv {d:.5}, bound {bound:.5}");
        assert!(d < bound, "position {j}: tv {d:.5} >= bound {bound:.5}");
    }
    // The reject branch: a rejected first group follows [Q_c − P_c]_+ / TV(P_c, Q_c).
    let (pc, qc) = (g.coarse_distribution(&p[0]), g.coarse_distribution(&q[0]));
    let residual: Vec<f64> = pc.iter().zip(&qc).map(|(p, q)| (q - p).max(0.0)).collect();
    let total: f64 = residual.iter().sum();
    let residual: Vec<f64> = residual.iter().map(|r| r / total).collect();
    let mut rejected = vec![0usize; g.n_groups()];
    for (_, v) in results.iter().filter(|(_, v)| v.accepted == 0) {
        rejected[v.groups[0] as usize] += 1;
    }
    let (d, bound) = check(&rejected, &residual);
    eprintln!(
        "pcg rejections: {} samples, tv {d:.5}, bound {bound:.5}",
        rejected.iter().sum::<usize>()
    );
    assert!(d < bound, "rejected groups: tv {d:.5} >= bound {bound:.5}");
    // A verifier given wrong draft probabilities fails the same check at some position.
    let uniform = vec![vec![0.125f32; 8]; 3];
    let wrong = worst_group_ratio(&run(&rule, &p, &uniform, &q, 41), &g, &q);
    eprintln!("pcg wrong draft probabilities, all positions: tv / bound {wrong:.2}");
    assert!(wrong > 1.0, "wrong-p PCG passed at every position: {wrong}");
    assert!(worst_group_ratio(&results, &g, &q) < 1.0);
}

#[test]
fn pcg_redraws_inside_an_accepted_group_when_the_target_cannot_emit_the_draft() {
    let g = groups();
    let rule = AcceptanceRule::Groups(g.clone());
    // The target gives token 1 no mass; the draft proposes it 30 % of the time. Token 1 is in
    // groups {0,1,2} and {1,2,3}, which the target still reaches through 0, 2 and 3.
    let mut q0 = target()[0].clone();
    q0[0] += q0[1];
    q0[1] = 0.0;
    let q = vec![q0.clone(), target()[1].clone()];
    let p = vec![draft()[0].clone()];
    assert!(p[0][1] > 0.25);
    let results = run(&rule, &p, &p, &q, 51);
    // The target's law over groups still holds, and token 1 is never emitted.
    let (d, bound) = check(
        &position_group_counts(&results, g.n_groups())[0],
        &g.coarse_distribution(&q0),
    );
    assert!(
        d < bound,
        "groups with q(x) = 0: tv {d:.5} >= bound {bound:.5}"
    );
    let mut in_group: Vec<Vec<usize>> = vec![vec![0; 8]; g.n_groups()];
    for (drafts, v) in &results {
        let emitted = if v.accepted >= 1 { drafts[0] } else { v.next };
        assert_ne!(emitted, 1, "the target cannot emit token 1");
        // Eq. 10 branch: the draft was 1, its group accepted (no thinning), the token redrawn.
        if drafts[0] == 1 && v.accepted == 0 && v.trials == 0 && !v.fallback {
            in_group[v.groups[0] as usize][v.next as usize] += 1;
        }
    }
    // Inside the accepted group the token follows q(t) w_{k,t} / Q_c(G_k).
    let mut branches = 0;
    for (k, counts) in in_group.iter().enumerate() {
        let n: usize = counts.iter().sum();
        if n < 5_000 {
            continue;
        }
        branches += 1;
        let mass: Vec<f64> = (0..8u32)
            .map(|t| {
                if g.members(k).contains(&t) {
                    f64::from(q0[t as usize]) * g.weight(t)
                } else {
                    0.0
                }
            })
            .collect();
        let z: f64 = mass.iter().sum();
        let law: Vec<f64> = mass.iter().map(|m| m / z).collect();
        let (d, bound) = check(counts, &law);
        eprintln!("group {k} redraws: {n} samples, tv {d:.5}, bound {bound:.5}");
        assert!(d < bound, "group {k}: tv {d:.5} >= bound {bound:.5}");
    }
    assert!(
        branches >= 1,
        "the q(x) = 0 branch was not reached: {in_group:?}"
    );
}
