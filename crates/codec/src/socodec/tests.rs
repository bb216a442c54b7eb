use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};

use super::*;
use crate::socodec::train::{SoCodecData, SoCodecTask, SoCodecTrainConfig, SoCodecUtterance};
use voxspec_train::{BatchSource, TrainTask};

fn tiny(frame_ms: usize, quantizer: QuantizerKind) -> SoCodecConfig {
    let mut mel = crate::vocoder::VocosConfig::hop160().mel_config();
    mel.n_mels = 10;
    SoCodecConfig::new()
        .with_feature_dim(6)
        .with_frame_ms(frame_ms)
        .with_channels(8)
        .with_latent_dim(16)
        .with_streams(2)
        .with_sub_codebook_size(4)
        .with_rq_codebook_dim(Some(4))
        .with_kmeans_iters(2)
        .with_global_channels(8)
        .with_mel(mel)
        .with_clip_frames(20)
        .with_quantizer(quantizer)
}

fn normal(shape: [usize; 3], device: &Device) -> Tensor<3> {
    Tensor::random(shape, Distribution::Normal(0.0, 1.0), device)
}

#[test]
fn frame_shifts_give_the_paper_factors_and_shapes() {
    let device = Device::flex();
    for (ms, factors) in [(40, vec![2]), (120, vec![2, 3]), (240, vec![2, 2, 3])] {
        let cfg = tiny(ms, QuantizerKind::Opq);
        assert_eq!(cfg.factors(), factors);
        assert_eq!(cfg.mel_per_feature(), 2);
        let codec = cfg.init(&device).unwrap();
        let t = 2 * cfg.ratio();
        let out = codec
            .forward(
                normal([3, 6, t], &device),
                normal([3, 10, 25], &device),
                None,
            )
            .unwrap();
        assert_eq!(out.features.dims(), [3, 6, t]);
        assert_eq!(out.log_mel.dims(), [3, 10, 2 * t]);
        assert_eq!(out.quant.codes.dims(), [2, 3, 2]);
    }
}

#[test]
fn bad_configs_and_inputs_are_named() {
    let device = Device::flex();
    let err = tiny(50, QuantizerKind::Opq)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("frame_ms"), "{err}");
    let err = tiny(120, QuantizerKind::Opq)
        .with_streams(3)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(err.contains("streams"), "{err}");
    let codec = tiny(120, QuantizerKind::Opq).init(&device).unwrap();
    // length not a multiple of the 6-frame ratio
    let err = codec
        .latents(normal([1, 6, 7], &device))
        .unwrap_err()
        .to_string();
    assert!(err.contains("frame ratio"), "{err}");
    // a reference shorter than the clip window
    let err = codec
        .global_vector(normal([1, 10, 19], &device))
        .unwrap_err()
        .to_string();
    assert!(err.contains("clip window"), "{err}");
    let g = codec.global_vector(normal([1, 10, 20], &device)).unwrap();
    // tokens out of range, too many streams
    let tokens =
        |v: Vec<i64>, s| Tensor::<3, Int>::from_data(TensorData::new(v, [s, 1, 2]), &device);
    let err = codec
        .decode(tokens(vec![0, 16], 1), g.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("0..16"), "{err}");
    let err = codec
        .decode(tokens(vec![0; 6], 3), g.clone())
        .unwrap_err()
        .to_string();
    assert!(err.contains("quantizer layers"), "{err}");
    assert!(codec.decode(tokens(vec![15, -1], 1), g).is_err());
}

#[test]
fn decoding_the_tokens_equals_decoding_the_quantized_latents() {
    let device = Device::flex();
    for kind in [QuantizerKind::Opq, QuantizerKind::Rq] {
        let codec = tiny(120, kind).init(&device).unwrap();
        let x = normal([2, 6, 12], &device);
        let (codec, _) = codec
            .ema_update(x.clone(), &mut SplitMix64::new(1))
            .unwrap();
        let tokens = codec.encode(x.clone()).unwrap();
        assert_eq!(tokens.dims(), [2, 2, 2]);
        let g = codec.global_vector(normal([2, 10, 30], &device)).unwrap();
        let (q, _) = codec.quantize(codec.latents(x).unwrap(), None).unwrap();
        let want = codec.decode_latents(q.quantized, g.clone()).1;
        let got = codec.decode(tokens.clone(), g.clone()).unwrap();
        let diff = (want - got.clone()).abs().max().into_scalar::<f32>();
        assert!(diff < 1e-4, "{kind:?}: {diff}");
        // a prefix of the streams decodes too, and differs from all of them
        let first = codec.decode(tokens.narrow(0, 0, 1), g).unwrap();
        assert_eq!(first.dims(), got.dims());
        assert!((first - got).abs().max().into_scalar::<f32>() > 1e-6);
    }
}

#[test]
fn nested_dropout_only_for_opq_and_only_when_asked() {
    let device = Device::flex();
    let x = normal([4, 6, 12], &device);
    let opq = tiny(120, QuantizerKind::Opq).init(&device).unwrap();
    let lat = opq.latents(x.clone()).unwrap();
    let (_, kept) = opq
        .quantize(lat.clone(), Some(&mut SplitMix64::new(3)))
        .unwrap();
    let kept = kept.unwrap();
    assert!(kept.iter().all(|&k| (1..=2).contains(&k)));
    assert!(opq.quantize(lat, None).unwrap().1.is_none());
    let pq = tiny(120, QuantizerKind::Pq).init(&device).unwrap();
    let lat = pq.latents(x).unwrap();
    assert!(
        pq.quantize(lat, Some(&mut SplitMix64::new(3)))
            .unwrap()
            .1
            .is_none()
    );
}

#[test]
fn save_and_load_give_the_same_decoder() {
    let device = Device::flex();
    let cfg = tiny(40, QuantizerKind::Opq);
    let codec = cfg.init(&device).unwrap();
    let dir = std::env::temp_dir().join(format!("voxspec-socodec-{}", std::process::id()));
    save_socodec(&dir, &cfg, &codec).unwrap();
    let (cfg2, loaded) = load_socodec(&dir, &device).unwrap();
    assert_eq!(cfg2.frame_ms, 40);
    let x = normal([1, 6, 4], &device);
    let r = normal([1, 10, 20], &device);
    let a = codec.forward(x.clone(), r.clone(), None).unwrap().log_mel;
    let b = loaded.forward(x, r, None).unwrap().log_mel;
    assert!((a - b).abs().max().into_scalar::<f32>() < 1e-6);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn training_batches_are_deterministic_and_the_losses_run() {
    let device = Device::flex();
    let model = tiny(120, QuantizerKind::Opq);
    let utts: Vec<SoCodecUtterance> = (0..3)
        .map(|u| SoCodecUtterance {
            features: (0..(30 + 10 * u) * 6)
                .map(|i| (i as f32 * 0.37).sin())
                .collect(),
            log_mel: (0..(60 + 20 * u) * 10)
                .map(|i| (i as f32 * 0.11).cos())
                .collect(),
        })
        .collect();
    let cfg = SoCodecTrainConfig::new(model)
        .with_segment_frames(2)
        .with_reference_frames(25)
        .with_batch_size(2);
    let data = SoCodecData::new(utts, &cfg, true).unwrap();
    let a = data.batch(1, 0, &device).unwrap();
    let b = data.batch(1, 0, &device).unwrap();
    assert_eq!(a.features.dims(), [2, 6, 12]);
    assert_eq!(a.log_mel.dims(), [2, 10, 24]);
    assert_eq!(a.reference.dims(), [2, 10, 25]);
    assert_eq!(a.nested_seed, b.nested_seed);
    assert_eq!(
        a.features
            .clone()
            .into_data()
            .try_into_vec::<f32>()
            .unwrap(),
        b.features.into_data().try_into_vec::<f32>().unwrap()
    );
    let task = SoCodecTask::new(cfg, data, None).unwrap();
    let model = task.init_model(&device).unwrap();
    assert_eq!(task.phases().len(), 2);
    let g = task.loss(&model, &a, 0).unwrap();
    let names: Vec<&str> = g.terms.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["vq", "feature", "mel", "adversarial"] {
        assert!(names.contains(&want), "{names:?}");
    }
    assert!(g.total.into_scalar::<f32>().is_finite());
    let d = task.loss(&model, &a, 1).unwrap();
    assert!(d.total.into_scalar::<f32>().is_finite());
    let model = task.after_step(model, &[a], 0, 7).unwrap();
    assert!(model.generator.opq.as_ref().unwrap().pq.n_groups() == 4);
}
