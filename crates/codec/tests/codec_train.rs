//! Smoke test of codec training through the shared loop: a tiny SpeechTokenizer runs a few
//! steps with finite losses, its codebooks get k-means-initialised by the `after_step` hook,
//! and an interrupted run resumes to exactly the weights and codebooks of an uninterrupted
//! one.

use crate::common;

use burn::tensor::{Device, Tensor};
use common::{Record, serial};
use voxspec_codec::SpeechTokenizer;
use voxspec_codec::SpeechTokenizerConfig;
use voxspec_codec::losses::MelLossConfig;
use voxspec_codec::speechtokenizer::train::{
    CodecData, CodecTrainConfig, CodecTrainTask, CodecUtterance,
};
use voxspec_codec::speechtokenizer::{DiscriminatorsConfig, SeanetConfig};
use voxspec_train::{BatchSource, OptimConfig, TrainConfig, TrainTask, Trainer};

const HOP: usize = 8;
const SEMANTIC: usize = 6;

fn model_config() -> SpeechTokenizerConfig {
    SpeechTokenizerConfig::new()
        .with_seanet(
            SeanetConfig::new()
                .with_n_filters(2)
                .with_dimension(8)
                .with_strides(vec![4, 2])
                .with_lstm_layers(1),
        )
        .with_semantic_dimension(SEMANTIC)
        .with_n_q(2)
        .with_codebook_size(8)
        .with_kmeans_iters(3)
}

fn utterances() -> Vec<CodecUtterance> {
    (0..5)
        .map(|u| {
            let len = 300 + 37 * u;
            let samples: Vec<f32> = (0..len)
                .map(|n| 0.4 * (n as f32 * 0.05 * (u + 1) as f32).sin())
                .collect();
            let frames = len / HOP;
            let teacher: Vec<f32> = (0..frames * SEMANTIC)
                .map(|i| ((i * 7 + u) as f32 * 0.3).cos())
                .collect();
            CodecUtterance {
                samples,
                teacher: Some((teacher, frames, SEMANTIC)),
                codes: None,
            }
        })
        .collect()
}

fn task(device: &Device) -> CodecTrainTask {
    task_with(device, None)
}

fn task_with(device: &Device, adversarial: Option<DiscriminatorsConfig>) -> CodecTrainTask {
    task_from(device, config_with(adversarial))
}

fn task_from(device: &Device, config: CodecTrainConfig) -> CodecTrainTask {
    let data = CodecData::new(utterances(), 256, 2, HOP, 1).unwrap();
    CodecTrainTask::new(config, data, None, device).unwrap()
}

fn config_with(adversarial: Option<DiscriminatorsConfig>) -> CodecTrainConfig {
    CodecTrainConfig::new()
        .with_adversarial(adversarial)
        .with_model(model_config())
        .with_mel(
            MelLossConfig::new()
                .with_n_fft(64)
                .with_hop_length(16)
                .with_win_length(64)
                .with_n_mels(8)
                .with_lambdas(vec![45.0, 1.0]),
        )
        .with_segment_samples(256)
        .with_batch_size(2)
}

fn train_config(max_steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 11,
        max_steps,
        optimizer: OptimConfig {
            lr: 1e-3,
            ..OptimConfig::default()
        },
        checkpoint_every: 2,
        tensorboard: false,
        ..TrainConfig::default()
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().unwrap()
}

fn snapshot(model: &SpeechTokenizer) -> Vec<Vec<f32>> {
    let cb = &model.quantizer.layers[1].codebook;
    vec![
        values(model.encoder.first.conv.weight.val()),
        values(model.decoder.last.conv.weight.val()),
        values(model.quantizer.layers[0].codebook.embed.val()),
        values(cb.embed.val()),
        values(cb.cluster_size.val()),
        values(cb.embed_avg.val()),
    ]
}

#[test]
fn codec_trains_and_resumes_exactly() {
    let _guard = serial();
    let device = Device::flex().autodiff();

    let dir = tempfile::tempdir().unwrap();
    let trainer = Trainer::new(train_config(4), task(&device), dir.path(), &device);
    let mut record = Record::default();
    let out = trainer.run(&mut record).unwrap();
    assert_eq!(record.0.len(), 4);
    for values in &record.0 {
        for key in ["loss", "mel", "recon", "commitment", "distill"] {
            let v = values.get(key).copied().unwrap_or(f64::NAN);
            assert!(v.is_finite(), "{key} = {v}");
        }
    }
    assert!(out.model.generator.quantizer.is_initialized().unwrap());
    assert!(out.model.discriminator.is_none());

    let dir2 = tempfile::tempdir().unwrap();
    Trainer::new(train_config(2), task(&device), dir2.path(), &device)
        .run(&mut ())
        .unwrap();
    let resumed = Trainer::new(train_config(4), task(&device), dir2.path(), &device)
        .run(&mut ())
        .unwrap();
    assert_eq!(
        snapshot(&resumed.model.generator),
        snapshot(&out.model.generator)
    );
}

/// Decoder-only fine-tuning: the decoder moves, the encoder and every codebook (weights and
/// EMA statistics) stay bit-identical, so the codes of any input are unchanged.
#[test]
fn decoder_only_training_keeps_the_codes() {
    let _guard = serial();
    let device = Device::flex().autodiff();
    // A trained start: 2 steps of full training (codebooks k-means-initialised).
    let start = tempfile::tempdir().unwrap();
    let base = Trainer::new(train_config(2), task(&device), start.path(), &device)
        .run(&mut ())
        .unwrap()
        .model
        .generator;
    let weights = start.path().join("start.safetensors");
    voxspec_train::save_weights(&base, &weights).unwrap();

    let tune = |decoder_only: bool| {
        let t = task_from(&device, config_with(None).with_decoder_only(decoder_only))
            .with_init(weights.clone());
        let freeze = t.freeze_patterns();
        assert_eq!(freeze.is_empty(), !decoder_only);
        let dir = tempfile::tempdir().unwrap();
        let config = TrainConfig {
            freeze,
            ..train_config(3)
        };
        Trainer::new(config, t, dir.path(), &device)
            .run(&mut ())
            .unwrap()
            .model
            .generator
    };
    let before = snapshot(&base);
    let tuned = snapshot(&tune(true));
    assert_eq!(tuned[0], before[0], "encoder changed");
    assert_ne!(tuned[1], before[1], "decoder did not train");
    assert_eq!(tuned[2..], before[2..], "codebooks changed");
    // The same run without the flag moves the encoder and the codebooks: the check can fail.
    let full = snapshot(&tune(false));
    assert_ne!(full[0], before[0]);
    assert_ne!(full[3..], before[3..]);

    let wave = Tensor::<3>::from_data(
        burn::tensor::TensorData::new(
            (0..256)
                .map(|n| 0.4 * (n as f32 * 0.07).sin())
                .collect::<Vec<f32>>(),
            [1, 1, 256],
        ),
        &device,
    );
    let codes = |m: &SpeechTokenizer| values(m.encode(wave.clone(), 2).unwrap().float());
    assert_eq!(codes(&tune(true)), codes(&base));
}

/// Decoder-only training on given codes (e.g. a NAR's): each batch carries the given codes of
/// exactly the frames its wave segment covers (the last frame repeated past the end), the loss
/// renders those codes (other codes, another loss; no quantizer terms), and codes without
/// `decoder_only` are refused.
#[test]
fn decoder_only_training_renders_given_codes() {
    let _guard = serial();
    let device = Device::flex().autodiff();
    const N_Q: usize = 2;
    // Samples that name their own index, so a segment tells where it was cut.
    let with_codes = |shift: u32| -> Vec<CodecUtterance> {
        (0..3)
            .map(|u| {
                let len = 200 + 64 * u;
                let frames = len / HOP;
                let codes: Vec<u32> = (0..N_Q * frames)
                    .map(|i| (i as u32 * 3 + u as u32 + shift) % 8)
                    .collect();
                CodecUtterance {
                    samples: (0..len).map(|n| u as f32 + (n + 1) as f32 * 1e-4).collect(),
                    teacher: None,
                    codes: Some((codes, frames)),
                }
            })
            .collect()
    };
    let utts = with_codes(0);
    let data = CodecData::new(utts.clone(), 256, 2, HOP, 1).unwrap();
    let batch = data.batch(0, 0, &device).unwrap();
    let codes = batch
        .codes
        .clone()
        .expect("the batch carries the given codes");
    let [n_q, b, frames] = codes.dims();
    assert_eq!([n_q, b, frames], [N_Q, 2, 256 / HOP]);
    let got: Vec<i64> = codes.into_data().convert::<i64>().try_into_vec().unwrap();
    let wave = values(batch.wave.clone());
    for row in 0..b {
        let first_sample = wave[row * 256];
        let (u, utt) = utts
            .iter()
            .enumerate()
            .find(|(_, x)| x.samples.contains(&first_sample))
            .expect("the segment comes from an utterance");
        let s0 = utt.samples.iter().position(|&v| v == first_sample).unwrap();
        assert_eq!(s0 % HOP, 0, "utterance {u}: segments start on a frame");
        let (given, given_frames) = utt.codes.as_ref().unwrap();
        for q in 0..N_Q {
            for t in 0..frames {
                let src = (s0 / HOP + t).min(given_frames - 1);
                assert_eq!(
                    got[(q * b + row) * frames + t],
                    i64::from(given[q * given_frames + src]),
                    "layer {q}, row {row}, frame {t}"
                );
            }
        }
    }

    let config = config_with(None).with_decoder_only(true);
    let task_on = |utts: Vec<CodecUtterance>, config: CodecTrainConfig| {
        let data = CodecData::new(utts, 256, 2, HOP, 1).unwrap();
        CodecTrainTask::new(config, data, None, &device).unwrap()
    };
    let task = task_on(utts.clone(), config.clone());
    let model = task.init_model(&device).unwrap();
    let loss = |task: &CodecTrainTask, batch| {
        let l = task.loss(&model, &batch, 0).unwrap();
        let names: Vec<String> = l.terms.iter().map(|(n, _)| n.clone()).collect();
        (values(l.total)[0], names)
    };
    let (a, names) = loss(&task, batch.clone());
    assert_eq!(names, ["mel", "recon"]);
    let other = task_on(with_codes(5), config.clone());
    let (b_loss, _) = loss(&other, other.train_data().batch(0, 0, &device).unwrap());
    assert!(a.is_finite() && b_loss.is_finite());
    assert_ne!(a, b_loss, "the loss does not depend on the given codes");

    let plain = task_on(utts, config.with_decoder_only(false));
    assert!(plain.loss(&model, &batch, 0).is_err());
}

#[test]
fn adversarial_training_runs_two_phases() {
    let _guard = serial();
    let device = Device::flex().autodiff();
    let disc = DiscriminatorsConfig::new()
        .with_periods(vec![2, 3])
        .with_period_channels(2)
        .with_scales(2)
        .with_scale_channels(16);
    let dir = tempfile::tempdir().unwrap();
    let trainer = Trainer::new(
        train_config(3),
        task_with(&device, Some(disc)),
        dir.path(),
        &device,
    );
    let mut record = Record::default();
    let out = trainer.run(&mut record).unwrap();
    assert_eq!(record.0.len(), 3);
    for values in &record.0 {
        for key in [
            "generator/loss",
            "generator/adversarial",
            "generator/feature",
            "discriminator/loss",
            "discriminator/grad_norm",
        ] {
            let v = values.get(key).copied().unwrap_or(f64::NAN);
            assert!(v.is_finite(), "{key} = {v}");
        }
    }
    assert!(out.model.discriminator.is_some());
}

/// A new run's settings refuse a batch of 0 and segments outside (0, 60] s, round the segment
/// down to whole frames, and a `run.json` written before `init` and `decoder_codes` existed
/// still reads (a resumed run of then resumes now).
#[test]
fn codec_run_settings_check_their_input_and_read_older_run_files() {
    use voxspec_codec::CodecError;
    use voxspec_codec::speechtokenizer::run::{CodecRunFile, CodecRunOptions};
    use voxspec_nn::Preset;
    let options = CodecRunOptions {
        preset: Preset::Tiny,
        init: None,
        teacher_features: None,
        decoder_codes: None,
        segment_seconds: 0.51,
        batch_size: 2,
        seed: 7,
        adversarial: false,
        decoder_only: true,
    };
    let file = CodecRunFile::new(&options).expect("valid settings");
    let hop = file.task.model.hop_length();
    assert_eq!(hop, 320);
    // 0.51 s at 16 kHz = 8,160 samples = 25.5 frames of 320: 25 whole frames.
    assert_eq!(file.task.segment_samples, 25 * hop);
    assert_eq!(file.task.batch_size, 2);
    assert_eq!(file.task.data_seed, 7);
    assert!(file.task.decoder_only);
    assert_eq!(file.task.model.n_q, 4, "the tiny preset's RVQ layers");
    for (field, bad) in [
        (
            "batch_size",
            CodecRunOptions {
                batch_size: 0,
                ..options.clone()
            },
        ),
        (
            "segment",
            CodecRunOptions {
                segment_seconds: 0.0,
                ..options.clone()
            },
        ),
        (
            "segment",
            CodecRunOptions {
                segment_seconds: 61.0,
                ..options.clone()
            },
        ),
    ] {
        match CodecRunFile::new(&bad) {
            Err(CodecError::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected InvalidConfig, got {other:?}"),
        }
    }
    let mut json = serde_json::to_value(&file).expect("serialises");
    assert_eq!(json["preset"], "tiny");
    let object = json.as_object_mut().expect("an object");
    object.remove("init");
    object.remove("decoder_codes");
    let read: CodecRunFile = serde_json::from_value(json).expect("an older run.json reads");
    assert_eq!(read.preset, Preset::Tiny);
    assert!(read.init.is_none() && read.decoder_codes.is_none());
    assert_eq!(read.task.segment_samples, file.task.segment_samples);
}
