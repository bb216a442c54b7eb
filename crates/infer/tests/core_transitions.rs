//! Transition statistics: counts and smoothing against a direct computation, rows that sum to
//! 1 in both layouts, the sparse layout equal to the dense one on the entries it keeps, a
//! safetensors round trip, and named errors for files that are not transition files.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use safetensors::tensor::{Dtype, TensorView};
use voxspec_infer::{InferError, Transitions, TransitionsConfig};

/// Sequences with a skewed bigram structure: mostly `a → a + 1` or `a → 2a`, sometimes random.
fn corpus(vocab: u32, n: usize, len: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut s = vec![rng.random_range(0..vocab)];
            for _ in 1..len {
                let a = *s.last().unwrap();
                let r: f32 = rng.random();
                s.push(if r < 0.5 {
                    (a + 1) % vocab
                } else if r < 0.8 {
                    (2 * a) % vocab
                } else {
                    rng.random_range(0..vocab)
                });
            }
            s
        })
        .collect()
}

fn build(seqs: &[Vec<u32>], vocab: usize, config: &TransitionsConfig) -> Transitions {
    Transitions::from_sequences(seqs.iter().map(Vec::as_slice), vocab, config).unwrap()
}

fn row_sum(t: &Transitions, a: u32) -> f64 {
    (0..t.vocab_size() as u32)
        .map(|b| f64::from(t.log_q(a, b)).exp())
        .sum()
}

#[test]
fn smoothed_estimate_matches_direct_counts() {
    let vocab = 50;
    let seqs = corpus(vocab as u32, 30, 40, 1);
    let alpha = 0.5;
    let t = build(
        &seqs,
        vocab,
        &TransitionsConfig {
            alpha,
            ..TransitionsConfig::default()
        },
    );
    assert!(t.is_dense());
    let mut counts: HashMap<(u32, u32), f64> = HashMap::new();
    let mut totals = vec![0.0f64; vocab];
    for s in &seqs {
        for w in s.windows(2) {
            *counts.entry((w[0], w[1])).or_default() += 1.0;
            totals[w[0] as usize] += 1.0;
        }
    }
    for a in 0..vocab as u32 {
        for b in 0..vocab as u32 {
            let c = counts.get(&(a, b)).copied().unwrap_or(0.0);
            let q = (c + f64::from(alpha)) / (totals[a as usize] + f64::from(alpha) * vocab as f64);
            assert!(
                (f64::from(t.log_q(a, b)) - q.ln()).abs() < 1e-5,
                "({a}, {b})"
            );
        }
        assert!((row_sum(&t, a) - 1.0).abs() < 1e-4);
    }
    assert_eq!(t.counted(), (30, 30 * 39));
}

#[test]
fn sparse_rows_keep_the_top_successors_and_sum_to_one() {
    let vocab = 64;
    let seqs = corpus(vocab as u32, 50, 60, 2);
    let dense = build(&seqs, vocab, &TransitionsConfig::default());
    let sparse = build(
        &seqs,
        vocab,
        &TransitionsConfig {
            dense_max_vocab: 16,
            top_k: 4,
            ..TransitionsConfig::default()
        },
    );
    assert!(dense.is_dense() && !sparse.is_dense());
    for a in 0..vocab as u32 {
        assert!(
            (row_sum(&sparse, a) - 1.0).abs() < 1e-4,
            "row {a}: {}",
            row_sum(&sparse, a)
        );
        // The most likely successors are exact; the rest share one floor no larger than them.
        let mut order: Vec<u32> = (0..vocab as u32).collect();
        order.sort_by(|&x, &y| dense.log_q(a, y).total_cmp(&dense.log_q(a, x)));
        for &b in &order[..2] {
            assert!(
                (sparse.log_q(a, b) - dense.log_q(a, b)).abs() < 1e-5,
                "({a}, {b})"
            );
        }
        let floor = sparse.log_q(a, order[vocab - 1]);
        assert!(floor <= sparse.log_q(a, order[0]));
        // a → a + 1 and a → 2a are the dominant transitions of the corpus
        let v = vocab as u32;
        assert!(
            [(a + 1) % v, (2 * a) % v].contains(&order[0]),
            "row {a}: {}",
            order[0]
        );
    }
    // With top_k covering every seen successor, sparse equals dense everywhere.
    let wide = build(
        &seqs,
        vocab,
        &TransitionsConfig {
            dense_max_vocab: 16,
            top_k: vocab,
            ..TransitionsConfig::default()
        },
    );
    for a in 0..vocab as u32 {
        for b in 0..vocab as u32 {
            assert!((wide.log_q(a, b) - dense.log_q(a, b)).abs() < 1e-5);
        }
    }
}

#[test]
fn save_and_load_round_trip_both_layouts() {
    let dir = tempfile::tempdir().unwrap();
    let seqs = corpus(40, 20, 30, 3);
    for (name, config) in [
        ("dense.safetensors", TransitionsConfig::default()),
        (
            "sparse.safetensors",
            TransitionsConfig {
                dense_max_vocab: 8,
                top_k: 5,
                alpha: 0.1,
            },
        ),
    ] {
        let t = build(&seqs, 40, &config);
        let path = dir.path().join(name);
        t.save(&path).unwrap();
        let loaded = Transitions::load(&path).unwrap();
        assert_eq!(loaded, t, "{name}");
        assert_eq!(loaded.alpha(), config.alpha);
        // Saving again over the file works (atomic replace).
        loaded.save(&path).unwrap();
    }
}

fn write(
    path: &std::path::Path,
    tensors: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)>,
    meta: &[(&str, &str)],
) {
    let views: Vec<(&str, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let meta: HashMap<String, String> = meta
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    std::fs::write(path, safetensors::serialize(views, Some(meta)).unwrap()).unwrap();
}

fn load_err(path: &std::path::Path) -> String {
    match Transitions::load(path) {
        Err(e @ InferError::File { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains(&path.display().to_string()), "{msg}");
            msg
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn wrong_files_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.safetensors");
    assert!(load_err(&p).contains("cannot read"));
    std::fs::write(&p, b"not safetensors at all").unwrap();
    assert!(load_err(&p).contains("not a safetensors file"));

    let good_meta = [
        ("format", "voxspec-transitions"),
        ("version", "1"),
        ("layout", "dense"),
        ("vocab_size", "2"),
        ("alpha", "1"),
        ("top_k", "0"),
        ("sequences", "1"),
        ("pairs", "1"),
    ];
    let half = 0.5f32.ln().to_le_bytes().repeat(4);
    // A token shard, not transitions.
    write(
        &p,
        vec![("utt1", Dtype::U16, vec![1, 2], vec![0; 4])],
        &[("format", "voxspec-tokens")],
    );
    assert!(load_err(&p).contains("voxspec-tokens"));
    // Wrong shape, wrong dtype, missing tensor, bad value, bad layout.
    write(
        &p,
        vec![("log_q", Dtype::F32, vec![3], half[..12].to_vec())],
        &good_meta,
    );
    assert!(load_err(&p).contains("tensor log_q has shape [3]"));
    write(
        &p,
        vec![("log_q", Dtype::I32, vec![2, 2], half.clone())],
        &good_meta,
    );
    assert!(load_err(&p).contains("dtype"));
    write(
        &p,
        vec![("other", Dtype::F32, vec![2, 2], half.clone())],
        &good_meta,
    );
    assert!(load_err(&p).contains("no tensor \"log_q\""));
    let mut nan = half.clone();
    nan[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
    write(&p, vec![("log_q", Dtype::F32, vec![2, 2], nan)], &good_meta);
    assert!(load_err(&p).contains("log_q[1]"));
    let mut meta = good_meta;
    meta[2] = ("layout", "diagonal");
    write(
        &p,
        vec![("log_q", Dtype::F32, vec![2, 2], half.clone())],
        &meta,
    );
    assert!(load_err(&p).contains("diagonal"));
    // And the well-formed file loads.
    write(
        &p,
        vec![("log_q", Dtype::F32, vec![2, 2], half)],
        &good_meta,
    );
    let t = Transitions::load(&p).unwrap();
    assert!((t.log_q(1, 0) - 0.5f32.ln()).abs() < 1e-7);
}

#[test]
fn large_vocabularies_are_sparse() {
    let vocab = 5000;
    let seqs = corpus(vocab as u32, 10, 200, 4);
    let t = build(&seqs, vocab, &TransitionsConfig::default());
    assert!(!t.is_dense());
    for a in [0u32, 17, 4999] {
        assert!((row_sum(&t, a) - 1.0).abs() < 1e-3);
    }
    let mut block = Vec::new();
    t.block(&[1, 2, 4], &mut block);
    assert_eq!(block.len(), 9);
    assert_eq!(block[1], t.log_q(1, 2));
}
