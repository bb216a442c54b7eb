//! The Vocos vocoder: output length, mel front-end parity, save/load, and a training smoke run.

use burn::tensor::{Device, Tensor, TensorData};
use voxspec_audio::{LogMel, sine};
use voxspec_codec::vocoder::{
    MelLoss, VocoderLossConfig, VocoderTask, Vocos, VocosConfig, WaveSegments, load_vocoder,
    save_vocoder,
};
use voxspec_train::{OptimConfig, StepReport, TrainConfig, TrainObserver, Trainer};

fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

#[test]
fn forward_gives_frames_times_hop_samples() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let model = config.init(&device).unwrap();
    let istft = Vocos::istft(&config, &device).unwrap();
    for frames in [1usize, 7, 25] {
        let mel = Tensor::<3>::random(
            [2, config.n_mels, frames],
            burn::tensor::Distribution::Normal(-3.0, 1.0),
            &device,
        );
        let wave = model.forward(mel, &istft).unwrap();
        assert_eq!(wave.dims(), [2, frames * config.hop_length]);
        assert!(to_vec(wave).iter().all(|v| v.is_finite()));
    }
    // Wrong number of mel bands is an error naming the shape.
    let bad = Tensor::<3>::zeros([1, config.n_mels + 1, 4], &device);
    let err = model.forward(bad, &istft).unwrap_err().to_string();
    assert!(err.contains("[batch, 20, frames >= 1]"), "{err}");
    // Presets validate.
    for c in [
        VocosConfig::tiny(),
        VocosConfig::small(),
        VocosConfig::base(),
    ] {
        c.validate().unwrap();
    }
    assert!(VocosConfig::tiny().with_hop_length(200).validate().is_err());
}

#[test]
fn tensor_log_mel_matches_host_front_end() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let front = LogMel::new(config.mel_config()).unwrap();
    let mel_loss = MelLoss::new(&config, &device).unwrap();
    let x = sine(523.0, 16000, 64 * 30, 0.4);
    let host = front.compute(&x); // [frames, n_mels]
    let t = Tensor::<2>::from_data(TensorData::new(x.clone(), [1, x.len()]), &device);
    let got = to_vec(mel_loss.log_mel(t.clone())); // [1, n_mels, frames]
    let frames = front.n_frames(x.len());
    let m = config.n_mels;
    assert_eq!(got.len(), m * frames);
    let mut err = 0.0f32;
    for f in 0..frames {
        for b in 0..m {
            err = err.max((got[b * frames + f] - host[f * m + b]).abs());
        }
    }
    assert!(err < 1e-3, "max log-mel difference {err}");
    // The loss of a signal against itself is 0, against another is not.
    let same = to_vec(mel_loss.forward(t.clone(), t.clone()))[0];
    assert!(same.abs() < 1e-6);
    let y = sine(700.0, 16000, 64 * 30, 0.4);
    let u = Tensor::<2>::from_data(TensorData::new(y, [1, x.len()]), &device);
    assert!(to_vec(mel_loss.forward(t, u))[0] > 0.1);
}

#[test]
fn save_then_load_gives_the_same_waveform() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let model = config.init(&device).unwrap();
    let istft = Vocos::istft(&config, &device).unwrap();
    let dir = tempfile::tempdir().unwrap();
    save_vocoder(dir.path(), &config, &model).unwrap();
    let (read, loaded) = load_vocoder(dir.path(), &device).unwrap();
    assert_eq!(read, config);
    let mel = Tensor::<3>::random(
        [1, config.n_mels, 9],
        burn::tensor::Distribution::Normal(-3.0, 1.0),
        &device,
    );
    let a = to_vec(model.forward(mel.clone(), &istft).unwrap());
    let b = to_vec(loaded.forward(mel, &istft).unwrap());
    assert_eq!(a, b);
    // A config of another size does not load these weights.
    let other = config.clone().with_dim(48);
    voxspec_train::write_model_config(dir.path(), voxspec_codec::vocoder::VOCODER_KIND, &other)
        .unwrap();
    assert!(load_vocoder(dir.path(), &device).is_err());
}

#[derive(Default)]
struct Record(Vec<f64>);

impl TrainObserver for Record {
    fn on_step(&mut self, report: &StepReport) {
        if let Some(v) = report.values.get("loss") {
            self.0.push(*v);
        }
    }
}

#[test]
fn training_smoke_loss_decreases() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    // Synthetic corpus: three harmonic tones, 8 segments of 16 frames.
    let hop = config.hop_length;
    let waves: Vec<Vec<f32>> = [220.0f32, 330.0, 495.0]
        .iter()
        .map(|&f| {
            let a = sine(f, 16000, hop * 48, 0.3);
            let b = sine(2.0 * f, 16000, hop * 48, 0.15);
            a.iter().zip(&b).map(|(x, y)| x + y).collect()
        })
        .collect();
    let data = WaveSegments::new(&config, &waves, 16, 4, 7).unwrap();
    assert_eq!(data.len(), 9);
    let task = VocoderTask::new(config, VocoderLossConfig::tiny(), data);
    let steps = 30;
    let train = TrainConfig {
        max_steps: steps,
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        optimizer: OptimConfig {
            lr: 2e-3,
            weight_decay: 0.0,
            ..OptimConfig::default()
        },
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let trainer = Trainer::new(train, task, dir.path(), &device);
    let mut record = Record::default();
    let outcome = trainer.run(&mut record).unwrap();
    assert_eq!(outcome.step, steps);
    assert_eq!(outcome.skipped_steps, 0);
    let losses = &record.0;
    assert_eq!(losses.len(), steps);
    let head: f64 = losses[..5].iter().sum::<f64>() / 5.0;
    let tail: f64 = losses[steps - 5..].iter().sum::<f64>() / 5.0;
    eprintln!("vocoder smoke: first-5 mean loss {head:.3}, last-5 mean loss {tail:.3}");
    assert!(tail < 0.8 * head, "loss {head} -> {tail}: {losses:?}");
}
