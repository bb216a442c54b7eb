use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_train::{BatchSource, TrainConfig, TrainTask, Trainer};

use super::*;
use crate::vocoder::{Vocoder, VocosConfig};

/// A decoder of `n_q` layers of 16 codes, hop `codec_hop`, onto the tiny vocoder's mel (hop 64).
fn tiny(n_q: usize, codec_hop: usize) -> MelDecoderConfig {
    MelDecoderConfig::for_vocoder(n_q, 16, codec_hop, &VocosConfig::tiny())
        .with_dim(16)
        .with_intermediate_dim(32)
        .with_n_code_blocks(1)
        .with_n_mel_blocks(1)
}

/// An untrained vocoder of [`VocosConfig::tiny`].
fn tiny_vocoder(device: &Device) -> Vocoder {
    let config = VocosConfig::tiny();
    Vocoder::new(config.clone(), config.init(device).unwrap(), device).unwrap()
}

fn codes(rows: &[Vec<i64>], device: &Device) -> Tensor<3, Int> {
    let (n_q, frames) = (rows.len(), rows[0].len());
    let flat: Vec<i64> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [n_q, 1, frames]), device)
}

#[test]
fn the_output_has_u_mel_frames_per_code_frame_for_even_and_odd_u() {
    let device = Device::flex();
    for (hop, u) in [(128, 2), (192, 3), (64, 1)] {
        let config = tiny(2, hop);
        assert_eq!(config.upsample(), u);
        let model = config.init(&device).unwrap();
        let x = Tensor::<3, Int>::zeros([3, 2, 5], &device); // a third layer is ignored
        let mel = model.forward(x).unwrap();
        assert_eq!(mel.dims(), [2, config.mel.n_mels, 5 * u], "hop {hop}");
    }
}

#[test]
fn bad_configs_and_codes_are_named() {
    let device = Device::flex();
    let e = tiny(2, 100).validate().unwrap_err();
    assert!(e.to_string().contains("codec_hop"), "{e}");
    let e = tiny(0, 128).validate().unwrap_err();
    assert!(e.to_string().contains("n_q"), "{e}");
    let model = tiny(2, 128).init(&device).unwrap();
    let one_layer = model.forward(codes(&[vec![1, 2, 3]], &device)).unwrap_err();
    assert!(one_layer.to_string().contains("n_q >= 2"), "{one_layer}");
    let too_big = model
        .forward(codes(&[vec![1, 2, 16], vec![0, 0, 0]], &device))
        .unwrap_err();
    assert!(too_big.to_string().contains("0..16"), "{too_big}");
}

#[test]
fn every_layer_changes_the_output_and_time_stays_local() {
    let device = Device::flex();
    let config = tiny(2, 128);
    let model = config.init(&device).unwrap();
    let base = vec![vec![3i64; 40], vec![5i64; 40]];
    let out = |rows: &[Vec<i64>]| {
        model
            .forward(codes(rows, &device))
            .unwrap()
            .into_data()
            .iter::<f32>()
            .collect::<Vec<_>>()
    };
    let a = out(&base);
    let n_mels = config.mel.n_mels;
    let frames = 80;
    for q in 0..2 {
        let mut changed = base.clone();
        changed[q][20] = 9;
        let b = out(&changed);
        // Mel frames far from code frame 20 do not move (receptive field of a few frames).
        let moved: Vec<usize> = (0..frames)
            .filter(|&t| (0..n_mels).any(|m| (a[m * frames + t] - b[m * frames + t]).abs() > 1e-6))
            .collect();
        assert!(!moved.is_empty(), "layer {q} is ignored");
        assert!(
            moved.iter().all(|&t| t.abs_diff(41) <= 20),
            "layer {q} moved frames {moved:?}"
        );
    }
}

fn utterance(frames: usize, n_q: usize, u: usize, n_mels: usize, seed: u32) -> MelUtterance {
    // Each code frame's mel is a function of its codes: learnable.
    let codes: Vec<u32> = (0..n_q * frames)
        .map(|i| ((i as u32).wrapping_mul(7) + seed) % 16)
        .collect();
    let mut mel = Vec::with_capacity(frames * u * n_mels);
    for t in 0..frames * u {
        let c = codes[t / u] as f32;
        mel.extend((0..n_mels).map(|m| -3.0 + 0.2 * c * (1.0 + (m % 3) as f32)));
    }
    MelUtterance {
        codes,
        frames,
        mel,
        mel_frames: frames * u,
        phones: None,
    }
}

/// `task` trained 150 steps at lr 3e-3 in `dir`, no checkpoints: the fitted model.
fn train_briefly(task: MelDecoderTask, dir: &std::path::Path, device: &Device) -> MelDecoder {
    let mut train = TrainConfig {
        max_steps: 150,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    train.optimizer.lr = 3e-3;
    Trainer::new(train, task, dir, device)
        .run(&mut ())
        .unwrap()
        .model
        .valid()
}

#[test]
fn batches_crop_codes_and_mel_together_and_mask_the_padding() {
    let device = Device::flex();
    let config = tiny(2, 128);
    let (u, m) = (config.upsample(), config.mel.n_mels);
    let long = utterance(30, 2, u, m, 1);
    let short = utterance(6, 2, u, m, 5);
    let data = MelData::new(vec![long.clone(), short.clone()], &config, 10, 2, 7).unwrap();
    assert_eq!(data.batches_in_epoch(0), 1);
    let batch = data.batch(3, 0, &device).unwrap();
    let again = data.batch(3, 0, &device).unwrap();
    let c = batch.codes.into_data().iter::<i64>().collect::<Vec<_>>(); // [2, 2, 10]
    assert_eq!(c, again.codes.into_data().iter::<i64>().collect::<Vec<_>>());
    let target = batch.target.into_data().iter::<f32>().collect::<Vec<_>>(); // [2, m, 20]
    let mask = batch.mask.into_data().iter::<f32>().collect::<Vec<_>>(); // [2, 1, 20]
    for b in 0..2 {
        let valid = mask[b * 20..(b + 1) * 20]
            .iter()
            .filter(|&&v| v == 1.0)
            .count();
        let utt = if valid == 20 { &long } else { &short };
        assert_eq!(valid, if valid == 20 { 20 } else { 12 });
        // Find the crop offset from layer 0 and check layer 1 and the mel agree with it.
        let first = (0..=utt.frames.saturating_sub(10))
            .find(|&f| {
                (0..10.min(utt.frames)).all(|t| c[b * 10 + t] == i64::from(utt.codes[f + t]))
            })
            .expect("the codes are a crop of the utterance");
        for t in 0..10 {
            let src = (first + t).min(utt.frames - 1);
            assert_eq!(c[(2 + b) * 10 + t], i64::from(utt.codes[utt.frames + src]));
        }
        for t in 0..valid {
            for band in 0..m {
                assert_eq!(
                    target[(b * m + band) * 20 + t],
                    utt.mel[(first * u + t) * m + band]
                );
            }
        }
    }
}

#[test]
fn training_fits_codes_to_their_mel() {
    let device = Device::flex();
    let config = tiny(2, 128);
    let (u, m) = (config.upsample(), config.mel.n_mels);
    let utts: Vec<MelUtterance> = (0..4).map(|s| utterance(24, 2, u, m, s)).collect();
    let task = MelDecoderTask::new(
        config.clone(),
        MelData::new(utts.clone(), &config, 12, 4, 1).unwrap(),
    );
    let batch = MelData::new(utts, &config, 12, 4, 1)
        .unwrap()
        .batch(0, 0, &device)
        .unwrap();
    let before = task.init_model(&device).unwrap();
    let l0 = task.l1(&before, &batch).unwrap().into_scalar::<f32>();
    let dir = tempfile::tempdir().unwrap();
    let after = train_briefly(task, dir.path(), &device);
    let check = MelDecoderTask::new(
        config.clone(),
        MelData::new(vec![utterance(24, 2, u, m, 0)], &config, 12, 1, 1).unwrap(),
    );
    let l1 = check.l1(&after, &batch).unwrap().into_scalar::<f32>();
    assert!(l1 < 0.3 * l0, "L1 {l0} → {l1}");
    // Written and read back, it predicts the same log-mel.
    save_mel_decoder(dir.path(), &config, &after).unwrap();
    let (loaded_config, loaded) = load_mel_decoder(dir.path(), &device).unwrap();
    assert_eq!(loaded_config, config);
    let x = batch.codes.clone();
    let a = after
        .forward(x.clone())
        .unwrap()
        .into_data()
        .iter::<f32>()
        .collect::<Vec<_>>();
    let b = loaded
        .forward(x)
        .unwrap()
        .into_data()
        .iter::<f32>()
        .collect::<Vec<_>>();
    assert_eq!(a, b);
}

#[test]
fn speech_has_codec_hop_samples_per_frame_and_refuses_another_mel() {
    let device = Device::flex();
    let config = tiny(2, 128);
    let rows = vec![vec![1u32; 7], vec![2u32; 7]];
    let vocoder = tiny_vocoder(&device);
    for renderer in [
        MelRenderer::Vocoder(Box::new(vocoder)),
        MelRenderer::GriffinLim(crate::vocoder::GriffinLimConfig::default()),
    ] {
        let speech = MelSpeech::new(
            config.clone(),
            config.init(&device).unwrap(),
            renderer,
            &device,
        )
        .unwrap();
        let wave = speech.synthesize(&rows, None).unwrap();
        assert_eq!(wave.len(), 7 * 128);
        assert!(wave.iter().all(|v| v.is_finite()));
        let ragged = speech
            .synthesize(&[vec![1; 7], vec![1; 6]], None)
            .unwrap_err();
        assert!(ragged.to_string().contains("codes"), "{ragged}");
    }
    let other = VocosConfig::tiny().with_n_mels(24);
    let vocoder = Vocoder::new(other.clone(), other.init(&device).unwrap(), &device).unwrap();
    let e = MelSpeech::new(
        config.clone(),
        config.init(&device).unwrap(),
        MelRenderer::Vocoder(Box::new(vocoder)),
        &device,
    )
    .unwrap_err();
    assert!(e.to_string().contains("mel decoder predicts"), "{e}");
}

#[test]
fn a_window_with_its_context_renders_a_span_as_the_whole_utterance_does() {
    let device = Device::flex();
    span_renders_as_whole(tiny_vocoder(&device), &device);
    // Phase refinement ties each frame to the frames its iterations reach; the context covers
    // them.
    let refined = tiny_vocoder(&device)
        .with_phase_refinement(crate::vocoder::PhaseRefinement {
            iterations: 3,
            ..Default::default()
        })
        .unwrap();
    span_renders_as_whole(refined, &device);
}

fn span_renders_as_whole(vocoder: Vocoder, device: &Device) {
    let device = device.clone();
    let config = tiny(2, 128).with_n_code_blocks(2).with_n_mel_blocks(2);
    let speech = MelSpeech::new(
        config.clone(),
        config.init(&device).unwrap(),
        MelRenderer::Vocoder(Box::new(vocoder)),
        &device,
    )
    .unwrap();
    let frames = 64;
    let rows: Vec<Vec<u32>> = (0..2u32)
        .map(|q| {
            (0..frames as u32)
                .map(|t| (t * 7 + q * 5 + t * t) % 16)
                .collect()
        })
        .collect();
    let whole = speech.synthesize(&rows, None).unwrap();
    let scale = whole.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.0);
    let context = speech.context_frames().unwrap();
    let hop = 128;
    // The span's samples from a window of `c` frames of context on either side.
    let span = |from: usize, to: usize, c: usize| {
        let (lo, hi) = (from.saturating_sub(c), (to + c).min(frames));
        let window: Vec<Vec<u32>> = rows.iter().map(|r| r[lo..hi].to_vec()).collect();
        let samples = speech
            .synthesize_span(&window, None, from - lo, to - lo)
            .unwrap();
        assert_eq!(samples.len(), (to - from) * hop);
        samples
            .iter()
            .zip(&whole[from * hop..to * hop])
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()))
            / scale
    };
    for (from, to) in [(0, 10), (10, 30), (30, 50), (50, 64), (20, 21)] {
        let err = span(from, to, context);
        assert!(err < 1e-4, "span {from}..{to}: relative error {err}");
    }
    // Less context changes the interior spans' edges: the bound is not loose by construction.
    assert!(span(30, 34, 2) > 1e-3);
    assert!(speech.synthesize_span(&rows, None, 10, 65).is_err());
    assert!(
        speech
            .synthesize_span(&rows, None, 5, 5)
            .unwrap()
            .is_empty()
    );
    let gl = MelSpeech::new(
        config.clone(),
        config.init(&device).unwrap(),
        MelRenderer::GriffinLim(crate::vocoder::GriffinLimConfig::default()),
        &device,
    )
    .unwrap();
    assert_eq!(gl.context_frames(), None);
}

#[test]
fn frame_phones_follow_the_durations_and_end_with_no_phone() {
    let config = tiny(1, 128).with_phones(Some(5));
    assert_eq!(
        config.frame_phones(&[2, 0, 4], &[2, 1, 2], 7),
        [2, 2, 0, 4, 4, 5, 5]
    );
    // Durations past the frames are cut; lengths that disagree leave every frame untold.
    assert_eq!(config.frame_phones(&[2, 0], &[3, 3], 4), [2, 2, 2, 0]);
    assert_eq!(config.frame_phones(&[2, 0], &[3], 3), [5, 5, 5]);
}

fn phone_ids(ids: Vec<i64>, device: &Device) -> Tensor<2, Int> {
    let n = ids.len();
    Tensor::from_data(TensorData::new(ids, [1, n]), device)
}

#[test]
fn a_decoder_with_a_phone_input_needs_its_phones_and_hears_them_locally() {
    let device = Device::flex();
    let config = tiny(1, 128).with_phones(Some(5));
    let model = config.init(&device).unwrap();
    assert_eq!(model.phones(), 5);
    assert_eq!(tiny(1, 128).init(&device).unwrap().phones(), 0);
    let x = codes(&[vec![3; 40]], &device);
    let none = model.forward(x.clone()).unwrap_err();
    assert!(none.to_string().contains("phones"), "{none}");
    let range = model
        .forward_with_phones(x.clone(), Some(phone_ids(vec![6; 40], &device)))
        .unwrap_err();
    assert!(range.to_string().contains("0..=5"), "{range}");
    let short = model
        .forward_with_phones(x.clone(), Some(phone_ids(vec![1; 39], &device)))
        .unwrap_err();
    assert!(short.to_string().contains("[1, 40]"), "{short}");
    let out = |ids: Vec<i64>| {
        model
            .forward_with_phones(x.clone(), Some(phone_ids(ids, &device)))
            .unwrap()
            .into_data()
            .iter::<f32>()
            .collect::<Vec<_>>()
    };
    let base = vec![1i64; 40];
    let a = out(base.clone());
    let mut changed = base;
    changed[20] = 5; // "no phone" is an id like any other
    let b = out(changed);
    let (n_mels, frames) = (config.mel.n_mels, 80);
    let moved: Vec<usize> = (0..frames)
        .filter(|&t| (0..n_mels).any(|m| (a[m * frames + t] - b[m * frames + t]).abs() > 1e-6))
        .collect();
    assert!(!moved.is_empty(), "the phone changed nothing");
    assert!(moved.iter().all(|&t| t.abs_diff(41) < 30), "{moved:?}");
}

/// Utterances whose codes are all 0 and whose log-mel is a function of the phone alone: only
/// a decoder that reads the phones can fit them.
fn phone_utterances(config: &MelDecoderConfig, count: u32) -> Vec<MelUtterance> {
    let (u, m, frames) = (config.upsample(), config.mel.n_mels, 24);
    (0..count)
        .map(|s| {
            let phones: Vec<u32> = (0..frames as u32).map(|t| (t / 3 + s) % 5).collect();
            let mut mel = Vec::with_capacity(frames * u * m);
            for t in 0..frames * u {
                let p = phones[t / u] as f32;
                mel.extend((0..m).map(|band| -3.0 + 0.4 * p * (1.0 + (band % 2) as f32)));
            }
            MelUtterance {
                codes: vec![0; config.n_q * frames],
                frames,
                mel,
                mel_frames: frames * u,
                phones: Some(phones),
            }
        })
        .collect()
}

#[test]
fn batches_crop_the_phones_with_the_codes_and_pad_with_no_phone() {
    let device = Device::flex();
    let config = tiny(1, 128).with_phones(Some(5));
    let mut utts = phone_utterances(&config, 1);
    // Codes that give away the crop offset.
    utts[0].codes = (0..24).collect();
    let mut short = utts[0].clone();
    short.frames = 4;
    short.codes.truncate(4);
    short.mel.truncate(4 * 2 * config.mel.n_mels);
    short.mel_frames = 8;
    short.phones = Some(vec![1, 2, 3, 4]);
    let data = MelData::new(vec![utts[0].clone(), short], &config, 10, 2, 3).unwrap();
    let batch = data.batch(1, 0, &device).unwrap();
    let c = batch.codes.into_data().iter::<i64>().collect::<Vec<_>>();
    let p = batch
        .phones
        .expect("a phone decoder's batch has phones")
        .into_data()
        .iter::<i64>()
        .collect::<Vec<_>>();
    for b in 0..2 {
        if c[b * 10 + 5] == c[b * 10 + 4] {
            // The short one: its phones, then "no phone".
            assert_eq!(&p[b * 10..b * 10 + 10], &[1, 2, 3, 4, 5, 5, 5, 5, 5, 5]);
        } else {
            let first = c[b * 10] as usize;
            let want: Vec<i64> = (first..first + 10)
                .map(|t| i64::from(utts[0].phones.as_ref().unwrap()[t]))
                .collect();
            assert_eq!(&p[b * 10..b * 10 + 10], &want[..]);
        }
    }
    // A phone decoder refuses utterances without phones.
    let mut bare = utts[0].clone();
    bare.phones = None;
    let e = MelData::new(vec![bare], &config, 10, 1, 0).unwrap_err();
    assert!(e.to_string().contains("phones"), "{e}");
}

#[test]
fn only_a_decoder_that_reads_the_phones_fits_a_mel_the_codes_do_not_carry() {
    let device = Device::flex();
    let fit = |config: MelDecoderConfig| {
        let utts = phone_utterances(&config.clone().with_phones(Some(5)), 4);
        let data = || MelData::new(utts.clone(), &config, 12, 4, 1).unwrap();
        let task = MelDecoderTask::new(config.clone(), data());
        let batch = data().batch(0, 0, &device).unwrap();
        let l0 = task
            .l1(&task.init_model(&device).unwrap(), &batch)
            .unwrap()
            .into_scalar::<f32>();
        let dir = tempfile::tempdir().unwrap();
        let check = MelDecoderTask::new(config.clone(), data());
        let trained = train_briefly(task, dir.path(), &device);
        let l1 = check.l1(&trained, &batch).unwrap();
        l1.into_scalar::<f32>() / l0
    };
    device.seed(1);
    let told = fit(tiny(1, 128).with_phones(Some(5)));
    device.seed(1);
    let untold = fit(tiny(1, 128));
    assert!(told < 0.3, "with phones: L1 fell to {told} of its start");
    assert!(untold > 2.0 * told, "without phones {untold}, with {told}");
}

#[test]
fn a_config_written_before_the_phone_input_reads_as_a_decoder_of_codes_alone() {
    let config = tiny(2, 128);
    let mut json = serde_json::to_value(&config).unwrap();
    json.as_object_mut().unwrap().remove("phones");
    let read: MelDecoderConfig = serde_json::from_value(json).unwrap();
    assert_eq!(read.phones, None);
    assert_eq!(read, config);
}
