//! Codec learning checks. `initial_small_codec_passes_the_signal_through`: at
//! initialisation the small preset's latents and output depend on the input (with PyTorch's
//! default convolution initialisation they did not: see `speechtokenizer::INIT_GAIN`).
//! `small_codec_overfits_one_segment`: a narrow SpeechTokenizer of full depth (strides
//! [8, 5, 4, 2], BiLSTM, RVQ) trained through the shared loop on one short speech-like
//! segment reconstructs it much better after a few dozen steps.

use crate::common;

use burn::tensor::{Device, Tensor, TensorData};
use common::{Record, serial};
use voxspec_codec::SpeechTokenizerConfig;
use voxspec_codec::losses::MelLossConfig;
use voxspec_codec::speechtokenizer::SeanetConfig;
use voxspec_codec::speechtokenizer::train::{
    CodecData, CodecTrainConfig, CodecTrainTask, CodecUtterance,
};
use voxspec_train::{OptimConfig, TrainConfig, Trainer};

const HOP: usize = 320;
const SEGMENT: usize = 8 * HOP;

fn model_config() -> SpeechTokenizerConfig {
    SpeechTokenizerConfig::new()
        .with_seanet(
            SeanetConfig::new()
                .with_n_filters(4)
                .with_dimension(32)
                .with_lstm_layers(1),
        )
        .with_n_q(2)
        .with_codebook_size(16)
        .with_kmeans_iters(3)
        // The small preset's decay: with 8 vectors per update the codes must follow the
        // encoder within tens of steps.
        .with_ema_decay(0.95)
}

/// A voiced, speech-like segment: a harmonic series on a gliding 100–180 Hz pitch under a
/// syllable-rate envelope, at the level of the bundled corpus (RMS ≈ 0.05).
fn segment() -> Vec<f32> {
    let sr = 16000.0f32;
    let tau = 2.0 * std::f32::consts::PI;
    let mut phase = 0.0f32;
    (0..SEGMENT)
        .map(|n| {
            let t = n as f32 / sr;
            phase += tau * (140.0 + 40.0 * (tau * 2.0 * t).sin()) / sr;
            let envelope = 0.6 + 0.4 * (tau * 4.0 * t).sin();
            let voice: f32 = (1..16).map(|h| (h as f32 * phase).sin() / h as f32).sum();
            0.06 * envelope * voice
        })
        .collect()
}

#[test]
fn small_codec_overfits_one_segment() {
    let _serial = serial();
    let base = Device::flex();
    base.seed(3);
    let device = base.autodiff();
    let utterance = CodecUtterance {
        samples: segment(),
        teacher: None,
        codes: None,
    };
    let config = CodecTrainConfig::new()
        .with_model(model_config())
        .with_mel(MelLossConfig::new().with_lambdas(vec![45.0, 1.0]))
        .with_segment_samples(SEGMENT)
        .with_batch_size(1);
    let data = CodecData::new(vec![utterance.clone()], SEGMENT, 1, HOP, 0).unwrap();
    let task = CodecTrainTask::new(config, data, None, &device).unwrap();
    let steps = 60;
    let train = TrainConfig {
        seed: 3,
        max_steps: steps,
        log_every: 1,
        optimizer: OptimConfig {
            lr: 1e-3,
            clip_grad_norm: Some(5.0),
            ..OptimConfig::default()
        },
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut record = Record::default();
    let out = Trainer::new(train, task, dir.path(), &device)
        .run(&mut record)
        .unwrap();
    assert_eq!(record.0.len(), steps);
    let mean = |key: &str, range: std::ops::Range<usize>| {
        let n = range.len() as f64;
        range.map(|i| record.0[i][key]).sum::<f64>() / n
    };
    let (mel_start, mel_end) = (mean("mel", 0..3), mean("mel", steps - 5..steps));
    let (rec_start, rec_end) = (mean("recon", 0..3), mean("recon", steps - 5..steps));

    // The trained codec's output is not near silence: its RMS is at least a third of the
    // target's.
    let codec = out.model.generator;
    let wave: Tensor<3> = Tensor::from_data(
        TensorData::new(utterance.samples.clone(), [1, 1, SEGMENT]),
        &device,
    );
    let audio = codec.forward(wave, codec.n_q()).unwrap().audio;
    let rms = |t: Tensor<3>| f64::from(t.square().mean().sqrt().into_scalar::<f32>());
    let target_rms = rms(Tensor::from_data(
        TensorData::new(utterance.samples, [1, 1, SEGMENT]),
        &device,
    ));
    let output_rms = rms(audio);
    println!(
        "mel {mel_start:.2} -> {mel_end:.2}, recon {rec_start:.4} -> {rec_end:.4}, \
         rms {output_rms:.4} (target {target_rms:.4})"
    );
    assert!(
        mel_end < 0.5 * mel_start,
        "mel loss fell only from {mel_start:.2} to {mel_end:.2}"
    );
    assert!(
        rec_end < 0.8 * rec_start,
        "waveform L1 fell only from {rec_start:.4} to {rec_end:.4}"
    );
    assert!(
        output_rms > target_rms / 3.0,
        "output RMS {output_rms:.4} vs target {target_rms:.4}: near silence"
    );
}

/// At initialisation the small preset's latents and output must depend on the input: two
/// different waveforms give latents whose difference is a sizeable fraction of their
/// spread, and decoded outputs that differ. (With PyTorch's default initialisation the
/// decoder's output agreed to 4 digits for any input.)
#[test]
fn initial_small_codec_passes_the_signal_through() {
    let _serial = serial();
    let device = Device::flex();
    device.seed(1);
    let codec = SpeechTokenizerConfig::small().init(&device).unwrap();
    let a = segment();
    let b: Vec<f32> = a.iter().rev().map(|x| -0.5 * x).collect();
    let wave = |s: Vec<f32>| Tensor::<3>::from_data(TensorData::new(s, [1, 1, SEGMENT]), &device);
    let std = |t: Tensor<3>| {
        let mean = t.clone().mean();
        f64::from(
            (t - mean.unsqueeze())
                .square()
                .mean()
                .sqrt()
                .into_scalar::<f32>(),
        )
    };
    let (za, zb) = (
        codec.latents(wave(a.clone())).unwrap(),
        codec.latents(wave(b.clone())).unwrap(),
    );
    let latent_ratio = std(za.clone() - zb) / std(za.clone());
    let decode = |z: Tensor<3>| codec.decoder.forward(z);
    let (ya, yb) = (decode(za.clone()), decode(za.clone().mul_scalar(-1.0)));
    let output_ratio = std(ya.clone() - yb) / std(ya);
    println!("latent difference / spread {latent_ratio:.4}, output {output_ratio:.4}");
    assert!(
        latent_ratio > 0.05,
        "latents of different inputs differ by {latent_ratio:.2e} of their spread"
    );
    assert!(
        output_ratio > 0.05,
        "decoder outputs of different latents differ by {output_ratio:.2e} of their spread"
    );
}
