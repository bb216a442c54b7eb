//! The CTC loss against a brute-force sum over every frame-level path, and against Burn's own
//! `CTCLoss` on a padded batch (values and gradients through log-softmax).

use burn::nn::loss::{CTCLossConfig, Reduction};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_teacher::ctc::{collapse_path, ctc_alignment, ctc_loss, min_frames};

/// Deterministic pseudo-random numbers in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32
        })
        .collect()
}

/// Row-wise log-softmax of `[frames, classes]` logits (scaled to make peaky distributions).
fn log_softmax_rows(logits: &[f32], classes: usize) -> Vec<f32> {
    logits
        .chunks(classes)
        .flat_map(|row| {
            let z = row
                .iter()
                .map(|v| (3.0 * f64::from(*v)).exp())
                .sum::<f64>()
                .ln();
            row.iter().map(move |v| (3.0 * f64::from(*v) - z) as f32)
        })
        .collect()
}

/// −log p(target) and its gradient by enumerating all `classes^frames` paths.
fn brute_force(
    log_probs: &[f32],
    frames: usize,
    classes: usize,
    target: &[u32],
) -> (f64, Vec<f64>) {
    let mut total = 0.0f64;
    let mut occupancy = vec![0.0f64; frames * classes];
    let mut path = vec![0u32; frames];
    for code in 0..classes.pow(frames as u32) {
        let mut c = code;
        for p in path.iter_mut() {
            *p = (c % classes) as u32;
            c /= classes;
        }
        if collapse_path(&path, 0) != target {
            continue;
        }
        let prob: f64 = path
            .iter()
            .enumerate()
            .map(|(t, &k)| f64::from(log_probs[t * classes + k as usize]))
            .sum::<f64>()
            .exp();
        total += prob;
        for (t, &k) in path.iter().enumerate() {
            occupancy[t * classes + k as usize] += prob;
        }
    }
    let grad = occupancy.iter().map(|o| -o / total).collect();
    (-total.ln(), grad)
}

#[test]
fn forward_backward_matches_brute_force_enumeration() {
    let (frames, classes) = (6, 4); // 4096 paths
    let cases: [&[u32]; 6] = [&[1], &[1, 2], &[2, 2], &[3, 1, 3], &[1, 1, 1], &[]];
    for (i, target) in cases.iter().enumerate() {
        let lp = log_softmax_rows(&noise(frames * classes, i as u64 + 1), classes);
        let (nll, grad) = brute_force(&lp, frames, classes, target);
        let a = ctc_alignment(&lp, frames, classes, target, 0).unwrap();
        assert!(
            (a.nll - nll).abs() < 1e-6 * nll.abs().max(1.0),
            "target {target:?}: {} vs brute force {nll}",
            a.nll
        );
        for (j, (g, b)) in a.grad.iter().zip(&grad).enumerate() {
            assert!(
                (g - b).abs() < 1e-6,
                "target {target:?}, cell {j}: {g} vs {b}"
            );
        }
    }
    // Three frames cannot hold [1, 1, 1] (it needs 5): both say impossible.
    let lp = log_softmax_rows(&noise(3 * classes, 9), classes);
    assert_eq!(min_frames(&[1, 1, 1]), 5);
    assert!(brute_force(&lp, 3, classes, &[1, 1, 1]).0.is_infinite());
    assert!(
        ctc_alignment(&lp, 3, classes, &[1, 1, 1], 0)
            .unwrap()
            .nll
            .is_infinite()
    );
}

/// Per-utterance values and the gradient of the mean-reduced loss agree with Burn's
/// implementation on a batch with padded frames and padded targets.
#[test]
fn padded_batch_agrees_with_burn_ctc_loss() {
    let device = Device::flex().autodiff();
    let (batch, frames, classes) = (3, 12, 6);
    let targets: Vec<Vec<u32>> = vec![vec![1, 2, 3, 3], vec![5], vec![2, 4, 2, 1, 5]];
    let lengths = vec![12, 7, 10];
    let logits = noise(batch * frames * classes, 42);
    let leaf = |d: &Device| {
        Tensor::<3>::from_data(TensorData::new(logits.clone(), [batch, frames, classes]), d)
            .require_grad()
    };

    // Ours.
    let x = leaf(&device);
    let ours = ctc_loss(log_softmax(x.clone(), 2), &targets, &lengths, 0).unwrap();
    assert_eq!(ours.infinite, 0);
    let grads = ours.loss.backward();
    let ours_grad: Vec<f32> = x.grad(&grads).unwrap().into_data().try_into_vec().unwrap();
    let ours_value: f32 = ours.loss.into_scalar();

    // Burn's, on [frames, batch, classes] with zero-padded targets.
    let y = leaf(&device);
    let max_len = targets.iter().map(Vec::len).max().unwrap();
    let padded: Vec<i64> = targets
        .iter()
        .flat_map(|t| (0..max_len).map(move |i| t.get(i).map_or(0, |&v| i64::from(v))))
        .collect();
    let targets_t = Tensor::<2, Int>::from_data(TensorData::new(padded, [batch, max_len]), &device);
    let int = |v: Vec<i64>| Tensor::<1, Int>::from_data(TensorData::new(v, [batch]), &device);
    let input_lengths = int(lengths.iter().map(|&l| l as i64).collect());
    let target_lengths = int(targets.iter().map(|t| t.len() as i64).collect());
    let ctc = CTCLossConfig::new().init();
    let lp = log_softmax(y.clone(), 2).swap_dims(0, 1);
    let per_utt: Vec<f32> = ctc
        .forward(
            lp.clone(),
            targets_t.clone(),
            input_lengths.clone(),
            target_lengths.clone(),
        )
        .into_data()
        .try_into_vec()
        .unwrap();
    let burn_loss = ctc.forward_with_reduction(
        lp,
        targets_t,
        input_lengths,
        target_lengths,
        Reduction::Mean,
    );
    let grads = burn_loss.backward();
    let burn_grad: Vec<f32> = y.grad(&grads).unwrap().into_data().try_into_vec().unwrap();
    let burn_value: f32 = burn_loss.into_scalar();

    for (b, (ours, theirs)) in ours.nll.iter().zip(&per_utt).enumerate() {
        assert!(
            (*ours as f32 - theirs).abs() < 1e-3 * theirs.abs().max(1.0),
            "utterance {b}: {ours} vs burn {theirs}"
        );
    }
    assert!(
        (ours_value - burn_value).abs() < 1e-4 * burn_value.abs().max(1.0),
        "{ours_value} vs {burn_value}"
    );
    let max_diff = ours_grad
        .iter()
        .zip(&burn_grad)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(max_diff < 1e-4, "largest gradient difference {max_diff}");
    // Frames past an utterance's length get no gradient.
    let row = |b: usize, t: usize| &ours_grad[(b * frames + t) * classes..][..classes];
    assert!(row(1, 7).iter().chain(row(1, 11)).all(|&g| g == 0.0));
    assert!(row(1, 6).iter().any(|&g| g != 0.0));
}

#[test]
fn unreachable_targets_are_left_out_of_the_mean() {
    let device = Device::flex();
    let (frames, classes) = (4, 3);
    let logits = noise(2 * frames * classes, 5);
    let x = Tensor::<3>::from_data(TensorData::new(logits, [2, frames, classes]), &device);
    let lp = log_softmax(x, 2);
    // Utterance 1 has 2 frames for [1, 1, 2] (needs 4).
    let both = ctc_loss(lp.clone(), &[vec![1, 2], vec![1, 1, 2]], &[4, 2], 0).unwrap();
    assert_eq!(both.infinite, 1);
    assert!(both.nll[1].is_infinite());
    let alone = ctc_loss(
        lp.clone().slice([0..1, 0..frames, 0..classes]),
        &[vec![1, 2]],
        &[4],
        0,
    )
    .unwrap();
    let (a, b): (f32, f32) = (both.loss.into_scalar(), alone.loss.into_scalar());
    assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    assert!(ctc_loss(lp, &[vec![1]], &[4, 4], 0).is_err());
}
