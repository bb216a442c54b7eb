//! The integration tests of `voxspec-align`, one test binary: the forward-sum loss's gradient,
//! training on frames with planted phone boundaries (the aligner must find them), the model
//! files, and the bundled corpus end to end (G2P topology, features, alignment written as a
//! TextGrid that reads back). The tests seed Burn's process-global RNG, so they run one at a
//! time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use burn::module::Module;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use voxspec_align::{
    AlignCorpus, AlignTask, AlignTaskConfig, AlignUtterance, Aligner, AlignerModelConfig,
    BoundaryErrors, Objective, Scoring, Topology, forward_backward, forward_sum_loss,
};
use voxspec_data::{Alignment, NoProgress, Utterance};
use voxspec_teacher::ctc::FrontendConfig;
use voxspec_train::{LrSchedule, OptimConfig, TrainConfig, Trainer};

static RNG: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|p| p.into_inner())
}

fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect()
}

/// The surrogate's gradient equals central finite differences of the host loss.
#[test]
fn forward_sum_gradient_matches_finite_differences() {
    let _guard = serial();
    let device = Device::flex().autodiff();
    let (batch, frames, classes) = (2, 9, 5);
    let lengths = vec![9, 6];
    let topologies = vec![
        Topology::new(
            vec![0, 1, 0, 2, 3, 0],
            vec![false, false, true, false, false, false],
        )
        .unwrap(),
        Topology::required(vec![0, 4, 1, 0]).unwrap(),
    ];
    let logits = noise(batch * frames * classes, 5);
    let x = Tensor::<3>::from_data(
        TensorData::new(logits.clone(), [batch, frames, classes]),
        &device,
    )
    .require_grad();
    let levels = [vec![50.0f32; 9], vec![50.0f32; 6]];
    let level_refs: Vec<&[f32]> = levels.iter().map(Vec::as_slice).collect();
    // The prior is held constant in the surrogate, so compare without it.
    let plain = Scoring::new().with_prior_scale(0.0).with_silence_gate(None);
    let out = forward_sum_loss(
        log_softmax(x.clone(), 2),
        &lengths,
        &topologies,
        &level_refs,
        &plain,
    )
    .unwrap();
    let grads = out.loss.backward();
    let grad: Vec<f32> = x.grad(&grads).unwrap().into_data().try_into_vec().unwrap();

    // The loss on the host, in f64: mean over utterances of nll / frames.
    let host_loss = |v: &[f64]| -> f64 {
        let mut total = 0.0;
        for b in 0..batch {
            let mut lp = Vec::new();
            for t in 0..lengths[b] {
                let row = &v[(b * frames + t) * classes..(b * frames + t + 1) * classes];
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z = m + row.iter().map(|r| (r - m).exp()).sum::<f64>().ln();
                lp.extend(row.iter().map(|r| (r - z) as f32));
            }
            let p = forward_backward(&lp, lengths[b], classes, &topologies[b]).unwrap();
            total += -p.log_likelihood / lengths[b] as f64;
        }
        total / batch as f64
    };
    let base: Vec<f64> = logits.iter().map(|&v| f64::from(v)).collect();
    let eps = 1e-3;
    for i in (0..base.len()).step_by(7) {
        let mut up = base.clone();
        up[i] += eps;
        let mut down = base.clone();
        down[i] -= eps;
        let numeric = (host_loss(&up) - host_loss(&down)) / (2.0 * eps);
        assert!(
            (numeric - f64::from(grad[i])).abs() < 2e-3,
            "logit {i}: numeric {numeric}, surrogate {}",
            grad[i]
        );
    }
    // padded frames get no gradient
    let padded = (frames + 7) * classes; // utterance 1, frame 7
    assert!(grad[padded..padded + classes].iter().all(|&g| g == 0.0));
}

/// Synthetic utterances: each class has its own 16-band signature, phones last 3–10 frames,
/// with noise. Returns the utterances and each one's true segment ends (in frames).
fn planted(n: usize, seed: u64) -> (Vec<AlignUtterance>, Vec<Vec<usize>>) {
    let bands = 16;
    let mut rng = StdRng::seed_from_u64(seed);
    let signatures: Vec<Vec<f32>> = (0..6)
        .map(|_| (0..bands).map(|_| rng.random_range(-1.5f32..1.5)).collect())
        .collect();
    let mut utts = Vec::new();
    let mut truths = Vec::new();
    for i in 0..n {
        let len = rng.random_range(3..7);
        let mut classes = vec![0u32];
        for _ in 0..len {
            // no phone twice in a row: nothing in the audio would mark their boundary
            let prev = *classes.last().unwrap();
            let mut c = rng.random_range(1..6u32);
            while c == prev {
                c = rng.random_range(1..6u32);
            }
            classes.push(c);
        }
        classes.push(0);
        let mut feats = Vec::new();
        let mut levels = Vec::new();
        let mut ends = Vec::new();
        let mut frames = 0;
        for &c in &classes {
            let d = rng.random_range(3..11);
            for _ in 0..d {
                levels.push(if c == 0 { 20.0 } else { 60.0 });
                feats.extend(
                    signatures[c as usize]
                        .iter()
                        .map(|&s| s + rng.random_range(-0.6f32..0.6)),
                );
            }
            frames += d;
            ends.push(frames);
        }
        let id = format!("u{i}");
        utts.push(AlignUtterance {
            utterance: Utterance {
                id: id.clone(),
                speaker: "s".into(),
                chapter: String::new(),
                path: format!("{id}.wav"),
                text: String::new(),
                duration: frames as f64 * 0.01,
                sample_rate: 16000,
                alignment: None,
            },
            frames,
            features: Arc::new(feats),
            levels: Arc::new(levels),
            topology: Topology::required(classes).unwrap(),
        });
        truths.push(ends);
    }
    (utts, truths)
}

fn train_config(steps: usize) -> TrainConfig {
    TrainConfig {
        seed: 3,
        max_steps: steps,
        optimizer: OptimConfig {
            lr: 5e-3,
            warmup_steps: 5,
            schedule: LrSchedule::Constant,
            ..OptimConfig::default()
        },
        log_every: 10,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    }
}

/// Trained from the transcripts alone (flat start, then Viterbi training), the aligner puts
/// ≥ 90 % of the planted boundaries within one frame; untrained, it does not. Saved and loaded,
/// it aligns identically.
#[test]
fn training_finds_planted_boundaries() {
    let _guard = serial();
    let device = Device::flex();
    let (utts, truths) = planted(48, 7);
    let corpus = Arc::new(AlignCorpus::from_utterances(utts, 16).unwrap());
    let model = AlignerModelConfig::tiny().with_n_mels(16);
    // Balanced classes and silence only at the ends: the posteriors themselves (no class
    // prior) are the right scores here.
    let scoring = Scoring::new().with_prior_scale(0.0);
    let config = AlignTaskConfig::new(model.clone())
        .with_batch_size(8)
        .with_scoring(scoring.clone())
        .with_seed(1);
    let within_one_frame = |aligner: &Aligner| -> f64 {
        let (done, failed) = aligner
            .align_corpus(&corpus, &|_| None, 4000, &device, &NoProgress)
            .unwrap();
        assert!(failed.is_empty());
        let (mut ok, mut total) = (0, 0);
        for (a, truth) in done.iter().zip(&truths) {
            let got: Vec<usize> = a
                .alignment
                .ends
                .iter()
                .map(|e| (e / 0.01 + 0.5).round() as usize)
                .collect();
            assert_eq!(got.len(), truth.len(), "{}", a.id);
            for (g, t) in got.iter().zip(truth).take(truth.len() - 1) {
                total += 1;
                ok += usize::from(g.abs_diff(*t) <= 1);
            }
        }
        ok as f64 / total as f64
    };
    let frontend = FrontendConfig::new().with_n_mels(16);

    let untrained = Aligner::new(
        model.init(&device).unwrap(),
        model.clone(),
        frontend.clone(),
        scoring.clone(),
    )
    .unwrap();
    let before = within_one_frame(&untrained);

    let dir = tempfile::tempdir().unwrap();
    let flat = dir.path().join("flat");
    let task = AlignTask::with_corpus(
        config.clone().with_objective(Objective::Uniform),
        corpus.clone(),
    )
    .unwrap();
    let outcome = Trainer::new(train_config(50), task, &flat, &device)
        .run(&mut ())
        .unwrap();
    voxspec_train::save_weights(&outcome.model, &flat.join("model.safetensors")).unwrap();
    let task = AlignTask::with_corpus(
        config
            .with_objective(Objective::Viterbi)
            .with_init_weights(Some(flat.join("model.safetensors"))),
        corpus.clone(),
    )
    .unwrap();
    let outcome = Trainer::new(train_config(300), task, dir.path().join("viterbi"), &device)
        .run(&mut ())
        .unwrap();
    let aligner = Aligner::new(outcome.model.valid(), model, frontend, scoring.clone()).unwrap();
    let after = within_one_frame(&aligner);
    assert!(
        after >= 0.9,
        "trained: {after:.3} of boundaries within a frame"
    );
    assert!(before < 0.5, "untrained: {before:.3}");

    let saved = dir.path().join("aligner");
    aligner.save(&saved).unwrap();
    let loaded = Aligner::load(&saved, &device).unwrap();
    let a = aligner
        .align_corpus(&corpus, &|_| None, 4000, &device, &NoProgress)
        .unwrap()
        .0;
    let b = loaded
        .align_corpus(&corpus, &|_| None, 4000, &device, &NoProgress)
        .unwrap()
        .0;
    assert_eq!(a, b);
    assert!(Aligner::load(dir.path(), &device).is_err());
}

fn minitts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts")
}

/// A bundled utterance goes through G2P, the front end and a (briefly trained) aligner into a
/// TextGrid that reads back with the transcript's phones, ending at the audio's end.
#[test]
fn bundled_utterances_align_into_textgrids() {
    let _guard = serial();
    let dir = minitts().join("train-clean-100/1001/1");
    let utts: Vec<Utterance> = (1..=4)
        .map(|i| {
            let id = format!("1001_1_{i:06}_000000");
            let path = dir.join(format!("{id}.flac"));
            let info = voxspec_audio::probe(&path).unwrap();
            Utterance {
                text: std::fs::read_to_string(dir.join(format!("{id}.normalized.txt"))).unwrap(),
                id,
                speaker: "1001".into(),
                chapter: "1".into(),
                path: path.to_string_lossy().into_owned(),
                duration: info.duration_secs(),
                sample_rate: info.sample_rate,
                alignment: None,
            }
        })
        .collect();
    let device = Device::flex();
    let model = AlignerModelConfig::tiny();
    let config = AlignTaskConfig::new(model.clone()).with_batch_size(4);
    let (task, corpus) = AlignTask::new(config, &utts, &NoProgress).unwrap();
    let out = tempfile::tempdir().unwrap();
    let outcome = Trainer::new(train_config(5), task, out.path(), &device)
        .run(&mut ())
        .unwrap();
    let aligner = Aligner::new(
        outcome.model.valid(),
        model,
        FrontendConfig::new(),
        Scoring::new(),
    )
    .unwrap();
    let (done, failed) = aligner
        .align_corpus(&corpus, &|_| None, 8000, &device, &NoProgress)
        .unwrap();
    assert!(failed.is_empty());
    for (a, u) in done.iter().zip(corpus.utterances()) {
        let path = out.path().join(format!("{}.TextGrid", a.id));
        voxspec_data::write_textgrid(&path, &a.alignment).unwrap();
        let back: Alignment = voxspec_data::read_textgrid(&path).unwrap();
        assert!((back.end() - u.utterance.duration).abs() < 1e-5);
        let speech: Vec<&str> = back
            .phones
            .iter()
            .map(String::as_str)
            .filter(|p| *p != "sil")
            .collect();
        let expected: Vec<&str> = voxspec_data::g2p(&u.utterance.text.to_lowercase())
            .unwrap()
            .into_iter()
            .filter(|p| *p != "SIL")
            .collect();
        assert_eq!(speech, expected, "{}", a.id);
        assert_eq!(back.phones.first().map(String::as_str), Some("sil"));
        // compared with itself, every boundary is exact
        let mut e = BoundaryErrors::default();
        assert!(e.add(&back, &a.alignment));
        assert!(e.mean_abs_error() < 1e-6);
    }
}
