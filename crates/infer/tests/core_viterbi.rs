//! Viterbi path selection against brute force: on small random problems the path found by
//! Algorithm 1 (log space) has the best score of all `m^n` paths, and equals the brute-force
//! argmax; with MTP candidates from real head rows and a `Transitions` block, the decoded block
//! is the best path over those candidates.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use voxspec_infer::sampler::{log_softmax, top_k_indices};
use voxspec_infer::viterbi::{path_log_score, union_candidates};
use voxspec_infer::{Transitions, TransitionsConfig, Viterbi};

/// Every path of `steps` states over `m`, by counting in base `m`.
fn brute_force(log_s: &[f32], log_q: &[f32], m: usize) -> (Vec<usize>, f32) {
    brute_force_from(&vec![0.0; m], log_s, log_q, m)
}

/// Brute force with `log_prior[s_1]` added to every path's score.
fn brute_force_from(
    log_prior: &[f32],
    log_s: &[f32],
    log_q: &[f32],
    m: usize,
) -> (Vec<usize>, f32) {
    let steps = log_s.len() / m;
    let mut best = (vec![0; steps], f32::NEG_INFINITY);
    let mut path = vec![0; steps];
    for code in 0..m.pow(steps as u32) {
        let mut c = code;
        for s in path.iter_mut().rev() {
            *s = c % m;
            c /= m;
        }
        let score = log_prior[path[0]] + path_log_score(log_s, log_q, m, &path);
        if score > best.1 {
            best = (path.clone(), score);
        }
    }
    best
}

fn log_probs(rng: &mut StdRng, rows: usize, m: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * m);
    for _ in 0..rows {
        let logits: Vec<f32> = (0..m).map(|_| rng.random::<f32>() * 6.0 - 3.0).collect();
        out.extend(log_softmax(&logits, 1.0));
    }
    out
}

#[test]
fn viterbi_equals_brute_force_on_random_cases() {
    let mut rng = StdRng::seed_from_u64(5);
    let mut solver = Viterbi::new();
    let mut cases = 0;
    for m in 1..=6 {
        for steps in 1..=5 {
            for _ in 0..8 {
                let log_s = log_probs(&mut rng, steps, m);
                let log_q = log_probs(&mut rng, m, m);
                let path = solver.best_path(&log_s, &log_q, m).unwrap();
                let (best, best_score) = brute_force(&log_s, &log_q, m);
                let score = path_log_score(&log_s, &log_q, m, &path.states);
                assert!(
                    (score - best_score).abs() <= 1e-4,
                    "m {m} steps {steps}: {score} vs {best_score}"
                );
                assert!((path.log_score - best_score).abs() <= 1e-4);
                // Random real scores have a unique optimum (up to rounding).
                if (score - best_score).abs() < 1e-6 {
                    assert_eq!(path.states, best, "m {m} steps {steps}");
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 6 * 5 * 8);
}

#[test]
fn a_prior_on_the_first_state_equals_brute_force() {
    let mut rng = StdRng::seed_from_u64(8);
    let mut solver = Viterbi::new();
    let mut changed = 0;
    for _ in 0..100 {
        let (m, steps) = (rng.random_range(1..6), rng.random_range(1..5));
        let log_s = log_probs(&mut rng, steps, m);
        let log_q = log_probs(&mut rng, m, m);
        let prior = log_probs(&mut rng, 1, m);
        let path = solver
            .best_path_from(Some(&prior), &log_s, &log_q, m)
            .unwrap();
        let (best, best_score) = brute_force_from(&prior, &log_s, &log_q, m);
        assert!((path.log_score - best_score).abs() < 1e-4);
        assert_eq!(path.states, best);
        changed += usize::from(solver.best_path(&log_s, &log_q, m).unwrap().states != best);
    }
    assert!(changed > 10, "the prior changed only {changed} paths");
    assert!(
        solver
            .best_path_from(Some(&[0.0]), &[0.0; 4], &[0.0; 4], 2)
            .is_err()
    );
}

#[test]
fn impossible_transitions_are_avoided() {
    // Sparse Q with −∞ entries (a hard constraint) and heads that prefer the forbidden path.
    let mut rng = StdRng::seed_from_u64(9);
    let mut solver = Viterbi::new();
    for _ in 0..50 {
        let m = 4;
        let log_s = log_probs(&mut rng, 4, m);
        let mut log_q = log_probs(&mut rng, m, m);
        for i in 0..m {
            // only i → i and i → i + 1 are possible
            for j in 0..m {
                if j != i && j != (i + 1) % m {
                    log_q[i * m + j] = f32::NEG_INFINITY;
                }
            }
        }
        let path = solver.best_path(&log_s, &log_q, m).unwrap();
        assert!(path.log_score.is_finite());
        for w in path.states.windows(2) {
            assert!(w[1] == w[0] || w[1] == (w[0] + 1) % m, "{:?}", path.states);
        }
        assert!((path.log_score - brute_force(&log_s, &log_q, m).1).abs() < 1e-4);
    }
}

#[test]
fn reduced_problem_from_heads_and_transitions() {
    // The decoder's reduction: top_k per head → unique candidates → S [n, m], Q block [m, m].
    // Its best path over candidates equals brute force over every candidate sequence scored
    // with the full-vocabulary S and Q.
    let mut rng = StdRng::seed_from_u64(3);
    let vocab = 30;
    let seqs: Vec<Vec<u32>> = (0..40)
        .map(|_| (0..50).map(|_| rng.random_range(0..vocab as u32)).collect())
        .collect();
    let q = Transitions::from_sequences(
        seqs.iter().map(Vec::as_slice),
        vocab,
        &TransitionsConfig::default(),
    )
    .unwrap();
    let mut solver = Viterbi::new();
    let mut block = Vec::new();
    for _ in 0..20 {
        let heads = 3;
        let rows: Vec<Vec<f32>> = (0..heads)
            .map(|_| {
                let logits: Vec<f32> = (0..vocab).map(|_| rng.random::<f32>() * 8.0).collect();
                log_softmax(&logits, 1.0)
            })
            .collect();
        let per_head: Vec<Vec<u32>> = rows.iter().map(|r| top_k_indices(r, 3)).collect();
        let cands = union_candidates(&per_head);
        let m = cands.len();
        assert!((3..=9).contains(&m));
        let log_s: Vec<f32> = rows
            .iter()
            .flat_map(|r| cands.iter().map(|&t| r[t as usize]))
            .collect();
        q.block(&cands, &mut block);
        let path = solver.best_path(&log_s, &block, m).unwrap();
        let tokens: Vec<u32> = path.states.iter().map(|&j| cands[j]).collect();
        // Score any candidate sequence directly from the full rows and Q.
        let direct = |ts: &[u32]| -> f32 {
            ts.iter()
                .enumerate()
                .map(|(t, &a)| {
                    rows[t][a as usize] + if t > 0 { q.log_q(ts[t - 1], a) } else { 0.0 }
                })
                .sum()
        };
        let (best, _) = brute_force(&log_s, &block, m);
        let best_tokens: Vec<u32> = best.iter().map(|&j| cands[j]).collect();
        assert!((direct(&tokens) - direct(&best_tokens)).abs() < 1e-4);
        assert!((direct(&tokens) - path.log_score).abs() < 1e-4);
    }
}
