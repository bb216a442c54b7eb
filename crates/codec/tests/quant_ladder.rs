//! The quantizer ladder: codebook EMA updates, k-means initialisation and dead-code restart on
//! toy cases worked by hand, straight-through gradients, encode/decode round trips, and the
//! residual quantizer's coarse-to-fine behaviour.

use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use voxspec_codec::quant::{
    EuclideanCodebookConfig, ResidualVectorQuantizerConfig, SplitMix64, VectorQuantizerConfig,
};
use voxspec_codec::{CodecError, EuclideanCodebook, ResidualVectorQuantizer};

fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

fn ints<const D: usize>(t: Tensor<D, Int>) -> Vec<i64> {
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .unwrap()
}

fn matrix(rows: &[[f32; 2]], device: &Device) -> Tensor<2> {
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), 2]), device)
}

/// A 2-d codebook with the given codes and a consistent EMA state: `cluster_size = sizes`,
/// `embed_avg = sizes · embed`; dead-code threshold `threshold`, capped at `share · n / K`.
fn codebook(
    codes: &[[f32; 2]],
    sizes: &[f32],
    threshold: f64,
    share: f64,
    device: &Device,
) -> EuclideanCodebook {
    let mut cb = EuclideanCodebookConfig::new()
        .with_dim(2)
        .with_codebook_size(codes.len())
        .with_kmeans_init(false)
        .with_threshold_ema_dead_code(threshold)
        .with_dead_code_share(share)
        .init(device);
    let embed = matrix(codes, device);
    let sums: Vec<[f32; 2]> = codes
        .iter()
        .zip(sizes)
        .map(|(c, n)| [c[0] * n, c[1] * n])
        .collect();
    cb.embed = burn::module::Param::initialized(cb.embed.id, embed).set_require_grad(false);
    cb.embed_avg = burn::module::Param::initialized(cb.embed_avg.id, matrix(&sums, device))
        .set_require_grad(false);
    cb.cluster_size = burn::module::Param::initialized(
        cb.cluster_size.id,
        Tensor::from_data(TensorData::new(sizes.to_vec(), [sizes.len()]), device),
    )
    .set_require_grad(false);
    cb
}

fn assert_all_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= tol,
            "{what}[{i}]: {a} vs {b} (got {got:?})"
        );
    }
}

#[test]
fn ema_update_follows_the_formulas() {
    let device = Device::flex();
    let cb = codebook(&[[0.0, 0.0], [10.0, 10.0]], &[4.0, 4.0], 0.0, 0.0, &device);
    // Three vectors near code 0, one near code 1.
    let x = matrix(&[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [9.0, 11.0]], &device);
    assert_eq!(ints(cb.encode(x.clone())), vec![0, 0, 0, 1]);
    let (cb, report) = cb.ema_update(x, &mut SplitMix64::new(0)).unwrap();
    assert!(!report.initialized);
    assert_eq!(report.restarted, 0);
    let d = 0.99f32;
    let sizes = [d * 4.0 + (1.0 - d) * 3.0, d * 4.0 + (1.0 - d) * 1.0];
    assert_all_close(&floats(cb.cluster_size.val()), &sizes, 1e-6, "cluster_size");
    let avg = [
        (1.0 - d) * 2.0,
        (1.0 - d) * 2.0,
        d * 40.0 + (1.0 - d) * 9.0,
        d * 40.0 + (1.0 - d) * 11.0,
    ];
    assert_all_close(&floats(cb.embed_avg.val()), &avg, 1e-5, "embed_avg");
    // embed = embed_avg / smoothed size, smoothed = (n + ε) / (Σn + Kε) · Σn.
    let (eps, total) = (1e-5f32, sizes[0] + sizes[1]);
    let smooth = |n: f32| (n + eps) / (total + 2.0 * eps) * total;
    let embed = [
        avg[0] / smooth(sizes[0]),
        avg[1] / smooth(sizes[0]),
        avg[2] / smooth(sizes[1]),
        avg[3] / smooth(sizes[1]),
    ];
    assert_all_close(&floats(cb.embed.val()), &embed, 1e-5, "embed");
}

#[test]
fn dead_codes_restart_from_batch_vectors() {
    let device = Device::flex();
    // Absolute threshold (EnCodec's rule, share 0): code 2 is far from the data and its EMA
    // size (1.0) is already below the threshold 2. The restart size is max(2, n / K = 5/3).
    let cb = codebook(
        &[[0.0, 0.0], [5.0, 5.0], [100.0, -100.0]],
        &[10.0, 10.0, 1.0],
        2.0,
        0.0,
        &device,
    );
    let batch = [[0.1, 0.2], [0.3, -0.1], [5.1, 4.9], [4.8, 5.3], [0.0, 0.4]];
    let x = matrix(&batch, &device);
    let (updated, report) = cb.ema_update(x.clone(), &mut SplitMix64::new(7)).unwrap();
    assert_eq!(report.restarted, 1);
    let embed = floats(updated.embed.val());
    let restarted = [embed[4], embed[5]];
    assert!(
        batch.contains(&restarted),
        "restarted code {restarted:?} is not a batch vector"
    );
    let sizes = floats(updated.cluster_size.val());
    assert_eq!(sizes[2], 2.0, "restarted size is the threshold");
    assert!(sizes[0] > 2.0 && sizes[1] > 2.0);
    let avg = floats(updated.embed_avg.val());
    assert_all_close(
        &avg[4..6],
        &[2.0 * restarted[0], 2.0 * restarted[1]],
        1e-6,
        "embed_avg",
    );
    // The living codes are untouched by the restart.
    assert!((embed[2] - 5.0).abs() < 0.1 && (embed[3] - 5.0).abs() < 0.1);

    // The same seed restarts the same way.
    let cb2 = codebook(
        &[[0.0, 0.0], [5.0, 5.0], [100.0, -100.0]],
        &[10.0, 10.0, 1.0],
        2.0,
        0.0,
        &device,
    );
    let (again, _) = cb2.ema_update(x, &mut SplitMix64::new(7)).unwrap();
    assert_eq!(floats(again.embed.val()), embed);
}

#[test]
fn the_dead_code_threshold_is_relative_to_the_batch() {
    let device = Device::flex();
    // K = 8 codes, batch of n = 4 vectors: the uniform share is n / K = 0.5, below the
    // absolute threshold 2. Codes 0..7 hold that share except code 7 (0.02, starved).
    let codes: Vec<[f32; 2]> = (0..8).map(|i| [i as f32, 0.0]).collect();
    let mut sizes = [0.5f32; 8];
    sizes[7] = 0.02;
    let batch = [[0.1, 0.0], [1.1, 0.0], [2.0, 0.1], [3.0, -0.1]];
    let x = matrix(&batch, &device);

    // EnCodec's rule (share 0) restarts every code, used or not: all sizes are below 2.
    let cb = codebook(&codes, &sizes, 2.0, 0.0, &device);
    let (_, report) = cb.ema_update(x.clone(), &mut SplitMix64::new(1)).unwrap();
    assert_eq!(report.restarted, 8);

    // share 0.1: τ = min(2, 0.1 · 0.5) = 0.05; only the starved code is below it (0.99 · 0.02).
    let cb = codebook(&codes, &sizes, 2.0, 0.1, &device);
    let (cb, report) = cb.ema_update(x.clone(), &mut SplitMix64::new(1)).unwrap();
    assert_eq!(report.restarted, 1);
    let embed = floats(cb.embed.val());
    let restarted = [embed[14], embed[15]];
    assert!(
        batch.contains(&restarted),
        "restarted code {restarted:?} is not a batch vector"
    );
    // It restarts at the uniform share, so it is kept for ln(0.1) / ln(0.99) ≈ 229 updates
    // that give it nothing, not re-drawn at the next one.
    let sizes_after = floats(cb.cluster_size.val());
    assert_all_close(&sizes_after[7..], &[0.5], 1e-6, "restart size");
    let avg = floats(cb.embed_avg.val());
    assert_all_close(
        &avg[14..16],
        &[0.5 * restarted[0], 0.5 * restarted[1]],
        1e-6,
        "embed_avg",
    );
    // Updates on batches that never pick code 7 keep it until its size decays below τ.
    let far = matrix(&[[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], &device);
    let (mut cb, mut rng, mut updates) = (cb, SplitMix64::new(2), 0usize);
    loop {
        updates += 1;
        let (next, report) = cb.ema_update(far.clone(), &mut rng).unwrap();
        cb = next;
        if floats(cb.cluster_size.val())[7] == 0.5 {
            // Re-drawn (again at the uniform share) only once the window has passed.
            assert!(report.restarted >= 1);
            break;
        }
        assert!(updates < 400, "code 7 was never restarted");
    }
    assert!(
        (225..=232).contains(&updates),
        "restarted after {updates} updates"
    );
}

#[test]
fn kmeans_initialises_on_the_first_batch() {
    let device = Device::flex();
    let centres = [[-5.0f32, -5.0], [-5.0, 5.0], [5.0, -5.0], [5.0, 5.0]];
    let mut rows = Vec::new();
    let mut rng = SplitMix64::new(11);
    for i in 0..200 {
        let c = centres[i % 4];
        let jitter = |r: &mut SplitMix64| (r.below(1000) as f32 / 1000.0 - 0.5) * 0.4;
        rows.push([c[0] + jitter(&mut rng), c[1] + jitter(&mut rng)]);
    }
    let x = matrix(&rows, &device);
    let cb = EuclideanCodebookConfig::new()
        .with_dim(2)
        .with_codebook_size(4)
        .with_kmeans_iters(10)
        .init(&device);
    assert!(!cb.is_initialized().unwrap());
    let (cb, report) = cb.ema_update(x, &mut SplitMix64::new(3)).unwrap();
    assert!(report.initialized && cb.is_initialized().unwrap());
    let embed = floats(cb.embed.val());
    let mut found: Vec<(i32, i32)> = embed
        .chunks(2)
        .map(|c| (c[0].round() as i32, c[1].round() as i32))
        .collect();
    found.sort();
    assert_eq!(found, vec![(-5, -5), (-5, 5), (5, -5), (5, 5)], "{embed:?}");
    // k-means sizes (50 each), then one EMA step with the same counts.
    assert_all_close(&floats(cb.cluster_size.val()), &[50.0; 4], 1e-3, "sizes");
}

#[test]
fn straight_through_passes_the_gradient_and_commitment_pulls_to_the_code() {
    let device = Device::flex().autodiff();
    let vq = VectorQuantizerConfig::new()
        .with_dim(2)
        .with_codebook(
            EuclideanCodebookConfig::new()
                .with_codebook_size(2)
                .with_kmeans_init(false),
        )
        .init(&device);
    let x = matrix(&[[0.5, -0.25], [3.0, 1.0]], &device).require_grad();
    let out = vq.forward(x.clone());
    // Value: the code vectors.
    let decoded = vq.decode(out.codes.clone());
    assert_all_close(
        &floats(out.quantized.clone()),
        &floats(decoded.clone()),
        1e-6,
        "quantized",
    );
    // d/dx Σ w ⊙ quantized = w (straight-through).
    let w = matrix(&[[1.0, 2.0], [3.0, 4.0]], &device);
    let grads = (out.quantized * w).sum().backward();
    let g = floats(x.grad(&grads).unwrap());
    assert_eq!(g, vec![1.0, 2.0, 3.0, 4.0]);
    // d/dx commitment = 2 (x − e) / numel.
    let grads = out.commitment_loss.backward();
    let g = floats(x.grad(&grads).unwrap());
    let (xv, ev) = (floats(x.clone()), floats(decoded));
    let want: Vec<f32> = xv
        .iter()
        .zip(&ev)
        .map(|(a, b)| 2.0 * (a - b) / 4.0)
        .collect();
    assert_all_close(&g, &want, 1e-6, "commitment gradient");
    // Codebook buffers take no gradient.
    assert!(!vq.codebook.embed.val().is_require_grad());
}

fn trained_rvq(n_q: usize, dim: usize, device: &Device) -> (ResidualVectorQuantizer, Tensor<3>) {
    let rvq = ResidualVectorQuantizerConfig::new()
        .with_n_q(n_q)
        .with_layer(
            VectorQuantizerConfig::new().with_dim(dim).with_codebook(
                EuclideanCodebookConfig::new()
                    .with_codebook_size(16)
                    .with_kmeans_iters(5),
            ),
        )
        .init(device);
    device.seed(5);
    let x: Tensor<3> = Tensor::random([4, dim, 32], Distribution::Normal(0.0, 1.0), device);
    let mut rvq = rvq;
    let mut rng = SplitMix64::new(1);
    for _ in 0..3 {
        rvq = rvq.ema_update(x.clone(), &mut rng).unwrap().0;
    }
    (rvq, x)
}

#[test]
fn decode_of_encode_equals_the_quantized_output() {
    let device = Device::flex();
    let (rvq, x) = trained_rvq(4, 6, &device);
    assert!(rvq.is_initialized().unwrap());
    for n_q in 1..=4 {
        let out = rvq.forward(x.clone(), n_q).unwrap();
        let codes = rvq.encode(x.clone(), n_q).unwrap();
        assert_eq!(codes.dims(), [n_q, 4, 32]);
        assert_eq!(ints(codes.clone()), ints(out.codes.clone()), "n_q = {n_q}");
        let decoded = rvq.decode(codes).unwrap();
        assert_all_close(
            &floats(decoded),
            &floats(out.quantized),
            1e-5,
            &format!("decode(encode(x)), n_q = {n_q}"),
        );
        assert_eq!(out.layer_quantized.len(), n_q);
        assert_eq!(out.metrics.len(), n_q);
    }
    // Decoding a later range: layers 1..3 of the full codes.
    let codes = rvq.encode(x.clone(), 4).unwrap();
    let tail = rvq.decode_range(codes.clone().narrow(0, 1, 2), 1).unwrap();
    let full3 = rvq.decode(codes.clone().narrow(0, 0, 3)).unwrap();
    let first = rvq.decode(codes.narrow(0, 0, 1)).unwrap();
    assert_all_close(&floats(first + tail), &floats(full3), 1e-5, "range sum");
}

#[test]
fn fewer_layers_degrade_reconstruction_monotonically() {
    let device = Device::flex();
    let (rvq, x) = trained_rvq(6, 8, &device);
    let mut errors = Vec::new();
    for n_q in 1..=6 {
        let y = rvq.decode(rvq.encode(x.clone(), n_q).unwrap()).unwrap();
        errors.push((x.clone() - y).square().mean().into_scalar::<f32>());
    }
    let variance = x.square().mean().into_scalar::<f32>();
    assert!(errors[0] < variance, "{errors:?} vs {variance}");
    for w in errors.windows(2) {
        assert!(w[1] < w[0], "not decreasing: {errors:?}");
    }
}

#[test]
fn metrics_count_codes() {
    let device = Device::flex();
    let codes: Tensor<1, Int> = Tensor::from_data(
        TensorData::new(vec![0i64, 1, 2, 3, 0, 1, 2, 3], [8]),
        &device,
    );
    let m = voxspec_codec::QuantizerMetrics::of_codes(codes, 8);
    assert!((m.perplexity.into_scalar::<f32>() - 4.0).abs() < 1e-4);
    assert!((m.usage.into_scalar::<f32>() - 0.5).abs() < 1e-6);
}

#[test]
fn bad_layer_counts_and_shapes_are_errors() {
    let device = Device::flex();
    let (rvq, x) = trained_rvq(2, 4, &device);
    assert!(matches!(
        rvq.encode(x.clone(), 3),
        Err(CodecError::QuantizerLayers { available: 2, .. })
    ));
    assert!(rvq.forward(x.clone(), 0).is_err());
    let wrong: Tensor<3> = Tensor::zeros([1, 5, 3], &device);
    let err = rvq.encode(wrong, 1).unwrap_err().to_string();
    assert!(err.contains("[1, 5, 3]"), "{err}");
    let codes = rvq.encode(x, 2).unwrap();
    let three = Tensor::cat(vec![codes.clone(), codes.narrow(0, 0, 1)], 0);
    assert!(rvq.decode(three).is_err());
}

#[test]
fn the_residual_quantizer_passes_the_gradient_once() {
    let device = Device::flex().autodiff();
    let (rvq, x) = trained_rvq(4, 6, &device);
    let x = x.detach().require_grad();
    let out = rvq.forward(x.clone(), 4).unwrap();
    let w: Tensor<3> = Tensor::random([4, 6, 32], Distribution::Normal(0.0, 1.0), &device);
    let grads = (out.quantized * w.clone()).sum().backward();
    // d/dx Σ w ⊙ (q_0 + … + q_3) = w: the straight-through path counts once, not per layer.
    assert_all_close(
        &floats(x.grad(&grads).unwrap()),
        &floats(w),
        1e-6,
        "rvq gradient",
    );
    // Only layer 0's commitment reaches x: the mean over the 4 layers gives it weight 1/4.
    let out = rvq.forward(x.clone(), 4).unwrap();
    let grads = out.commitment_loss.backward();
    let g = floats(x.grad(&grads).unwrap());
    let layer0 = rvq.forward(x.clone(), 1).unwrap();
    let grads0 = layer0.commitment_loss.div_scalar(4.0).backward();
    assert_all_close(
        &g,
        &floats(x.grad(&grads0).unwrap()),
        1e-7,
        "commitment gradient",
    );
}
