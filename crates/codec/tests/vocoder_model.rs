//! The Vocos vocoder: output length, mel front-end parity, save/load, a training smoke run,
//! adversarial training, the phase losses and warm starts.

use burn::tensor::{Device, Tensor, TensorData};
use voxspec_audio::{LogMel, sine};
use voxspec_codec::speechtokenizer::DiscriminatorsConfig;
use voxspec_codec::vocoder::{
    MelLoss, VocoderLossConfig, VocoderTask, Vocos, VocosConfig, WaveSegments, load_vocoder,
    phase_loss, save_vocoder,
};
use voxspec_train::{OptimConfig, StepReport, TrainConfig, TrainObserver, TrainTask, Trainer};

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
        VocosConfig::hop256(),
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

/// `steps` steps at lr 2e-3, a log line each, no checkpoints or TensorBoard.
fn train_config(steps: usize) -> TrainConfig {
    TrainConfig {
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
    }
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
    let train = train_config(steps);
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

/// Every value of every step.
#[derive(Default)]
struct AllValues(Vec<std::collections::BTreeMap<String, f64>>);

impl TrainObserver for AllValues {
    fn on_step(&mut self, report: &StepReport) {
        self.0.push(report.values.clone());
    }
}

fn tones(hop: usize) -> Vec<Vec<f32>> {
    [220.0f32, 330.0, 495.0]
        .iter()
        .map(|&f| sine(f, 16000, hop * 48, 0.3))
        .collect()
}

#[test]
fn adversarial_training_alternates_generator_and_discriminator() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let data = WaveSegments::new(&config, &tones(config.hop_length), 16, 4, 7).unwrap();
    let loss = VocoderLossConfig {
        adversarial: Some(
            DiscriminatorsConfig::new()
                .with_periods(vec![2, 3])
                .with_period_channels(2)
                .with_scales(2)
                .with_scale_channels(8),
        ),
        ..VocoderLossConfig::tiny()
    };
    let task = VocoderTask::new(config, loss, data);
    let steps = 12;
    let train = train_config(steps);
    let dir = tempfile::tempdir().unwrap();
    let mut record = AllValues::default();
    let out = Trainer::new(train, task, dir.path(), &device)
        .run(&mut record)
        .unwrap();
    assert_eq!(record.0.len(), steps);
    for values in &record.0 {
        for key in [
            "generator/mel_l1",
            "generator/adversarial",
            "generator/feature",
            "discriminator/disc",
            "discriminator/grad_norm",
        ] {
            let v = values.get(key).copied().unwrap_or(f64::NAN);
            assert!(v.is_finite(), "{key} = {v}");
        }
    }
    // The discriminators learn to tell the tones from the untrained resynthesis.
    let disc: Vec<f64> = record.0.iter().map(|v| v["discriminator/disc"]).collect();
    let (head, tail) = (
        disc[..3].iter().sum::<f64>(),
        disc[steps - 3..].iter().sum::<f64>(),
    );
    assert!(tail < head, "discriminator loss {disc:?}");
    assert!(out.model.discriminator.is_some());
}

#[test]
fn init_starts_from_the_saved_vocoder() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let saved = config.init(&device).unwrap();
    let dir = tempfile::tempdir().unwrap();
    save_vocoder(dir.path(), &config, &saved).unwrap();
    let data = WaveSegments::new(&config, &tones(config.hop_length), 16, 4, 7).unwrap();
    let task = |init: bool| {
        let t = VocoderTask::new(config.clone(), VocoderLossConfig::tiny(), data.clone());
        if init {
            t.with_init(dir.path().join("model.safetensors"))
        } else {
            t
        }
    };
    let istft = Vocos::istft(&config, &device).unwrap();
    let mel = Tensor::<3>::random(
        [1, config.n_mels, 9],
        burn::tensor::Distribution::Normal(-3.0, 1.0),
        &device,
    );
    let expected = to_vec(saved.forward(mel.clone(), &istft).unwrap());
    let warm = task(true).init_model(&device).unwrap();
    assert_eq!(
        to_vec(warm.generator.forward(mel.clone(), &istft).unwrap()),
        expected
    );
    assert!(warm.discriminator.is_none());
    let cold = task(false).init_model(&device).unwrap();
    assert_ne!(
        to_vec(cold.generator.forward(mel, &istft).unwrap()),
        expected
    );
    // weights of another size are refused, naming the file
    let other = VocosConfig::tiny().with_dim(48);
    let err = VocoderTask::new(other, VocoderLossConfig::tiny(), data)
        .with_init(dir.path().join("model.safetensors"))
        .init_model(&device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.safetensors"), "{err}");
}

#[test]
fn the_phase_loss_ignores_whole_turns_and_charges_jumps_between_frames() {
    use std::f32::consts::PI;
    let device = Device::flex();
    let (bins, frames) = (5, 6);
    let phase = |f: &dyn Fn(usize, usize) -> f32| -> Tensor<3> {
        let v: Vec<f32> = (0..bins)
            .flat_map(|b| (0..frames).map(move |t| (b, t)))
            .map(|(b, t)| f(b, t))
            .collect();
        Tensor::from_data(TensorData::new(v, [1, bins, frames]), &device)
    };
    let target = || phase(&|b, t| 0.3 * b as f32 - 0.7 * t as f32);
    let loss = |pred: Tensor<3>| to_vec(phase_loss(pred, target()))[0];
    assert!(loss(target()) < 1e-5);
    // Whole turns, per bin and frame, cost nothing.
    let turns = phase(&|b, t| 0.3 * b as f32 - 0.7 * t as f32 + 2.0 * PI * ((b + t) % 3) as f32);
    assert!(loss(turns) < 1e-4);
    // A constant offset of 1 costs the instantaneous phase only.
    let offset = phase(&|b, t| 0.3 * b as f32 - 0.7 * t as f32 + 1.0);
    assert!((loss(offset) - 1.0).abs() < 1e-4);
    // Every other frame off by 1: instantaneous phase 0.5 on average, no group delay error,
    // instantaneous frequency off by 1 at every step.
    let jumps = phase(&|b, t| 0.3 * b as f32 - 0.7 * t as f32 + (t % 2) as f32);
    let jumped = loss(jumps);
    assert!((jumped - 1.5).abs() < 1e-4, "{jumped}");
}

#[test]
fn training_with_the_phase_loss_brings_the_phase_towards_the_recording() {
    let device = Device::flex();
    let config = VocosConfig::tiny();
    let data = WaveSegments::new(&config, &tones(config.hop_length), 16, 4, 7).unwrap();
    let loss = VocoderLossConfig {
        phase_weight: 1.0,
        ..VocoderLossConfig::tiny()
    };
    let task = VocoderTask::new(config, loss, data);
    let steps = 30;
    let dir = tempfile::tempdir().unwrap();
    let mut record = AllValues::default();
    Trainer::new(train_config(steps), task, dir.path(), &device)
        .run(&mut record)
        .unwrap();
    let phase: Vec<f64> = record.0.iter().map(|v| v["phase"]).collect();
    let (head, tail) = (
        phase[..5].iter().sum::<f64>(),
        phase[steps - 5..].iter().sum::<f64>(),
    );
    assert!(tail < 0.9 * head, "phase loss {phase:?}");
}

#[test]
fn phase_refinement_starts_from_the_vocoders_own_spectrum_and_makes_it_consistent() {
    use voxspec_audio::Stft;
    use voxspec_codec::vocoder::{
        MelInverse, PhaseRefinement, Vocoder, refine_phase, spectral_convergence,
    };
    let device = Device::flex();
    device.seed(5);
    let config = VocosConfig::tiny();
    let model = config.init(&device).unwrap();
    let frames = 23;
    let front = LogMel::new(config.mel_config()).unwrap();
    let wave = sine(
        220.0,
        config.sample_rate,
        (frames - 1) * config.hop_length,
        0.3,
    );
    let mel = front.compute(&wave);
    assert_eq!(mel.len(), frames * config.n_mels);
    let istft = Vocos::istft(&config, &device).unwrap();
    let plain = model
        .synthesize(&istft, &mel, config.n_mels, frames, &device)
        .unwrap();
    // The host spectrum through the host inverse STFT is the tensor path's waveform.
    let stft = Stft::new(config.stft_config()).unwrap();
    let spectrum = model
        .host_spectrum(&mel, config.n_mels, frames, &device)
        .unwrap();
    let length = frames * config.hop_length;
    let host = refine_phase(&stft, spectrum.clone(), length, 0, 0.99).unwrap();
    assert_eq!(host.len(), plain.len());
    let scale = plain.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-6);
    let worst = host
        .iter()
        .zip(&plain)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(
        worst <= 1e-4 * scale,
        "host {worst} vs tensor (peak {scale})"
    );
    // Iterations bring the signal's STFT magnitude closer to the predicted one.
    let target = spectrum.magnitude();
    let before = spectral_convergence(&target, &stft.forward(&host));
    let refined = refine_phase(&stft, spectrum, length, 16, 0.99).unwrap();
    let after = spectral_convergence(&target, &stft.forward(&refined));
    assert!(after < before, "spectral convergence {before} → {after}");
    // The vocoder refines its own phase on the magnitude the log-mel stands for, which its
    // output then matches better than without refinement.
    let vocoder = Vocoder::new(config.clone(), model, &device).unwrap();
    assert_eq!(vocoder.phase_refinement(), PhaseRefinement::NONE);
    assert_eq!(
        vocoder.synthesize(&mel, config.n_mels, frames).unwrap(),
        plain
    );
    let vocoder = vocoder
        .with_phase_refinement(PhaseRefinement {
            iterations: 16,
            ..PhaseRefinement::default()
        })
        .unwrap();
    let refined = vocoder.synthesize(&mel, config.n_mels, frames).unwrap();
    assert_eq!(refined.len(), length);
    assert_eq!(
        vocoder.config().phase_refinement,
        Some(vocoder.phase_refinement())
    );
    let mel_target = MelInverse::new(&config.mel_config())
        .unwrap()
        .magnitude(&mel, frames);
    let (sc_plain, sc_refined) = (
        spectral_convergence(&mel_target, &stft.forward(&plain)),
        spectral_convergence(&mel_target, &stft.forward(&refined)),
    );
    assert!(sc_refined < sc_plain, "{sc_plain} → {sc_refined}");
    let err = vocoder
        .with_phase_refinement(PhaseRefinement {
            iterations: 1,
            momentum: 1.0,
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("momentum"), "{err}");
    // A config.json written before the setting existed loads with none; one with it keeps it.
    let mut json = serde_json::to_value(&config).unwrap();
    json.as_object_mut().unwrap().remove("phase_refinement");
    let old: VocosConfig = serde_json::from_value(json).unwrap();
    assert_eq!(old.phase_refinement, None);
    let set = config.with_phase_refinement(Some(PhaseRefinement {
        iterations: 8,
        momentum: 0.9,
    }));
    let back: VocosConfig = serde_json::from_str(&serde_json::to_string(&set).unwrap()).unwrap();
    assert_eq!(back, set);
}
