//! The CTC model and teacher: padding invariance, hidden-state numbering, save/load round
//! trip, and the `SemanticTeacher` contract.

use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_data::{Normalization, TextTokenizer, TokenizerKind};
use voxspec_teacher::ctc::{CtcModelConfig, CtcTeacher, FrontendConfig, greedy_decode};
use voxspec_teacher::{LayerSelection, SemanticTeacher};

const TEXTS: [&str; 3] = [
    "The birch canoe slid on the smooth planks.",
    "Glue the sheet to the dark blue background.",
    "Rice is often served in round bowls.",
];

fn tokenizer() -> TextTokenizer {
    TextTokenizer::train(TEXTS, TokenizerKind::Char, &Normalization::default()).unwrap()
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().unwrap()
}

/// A chirp-like test waveform of `n` samples.
fn wave(n: usize, f: f32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let t = i as f32 / 16000.0;
            0.3 * (2.0 * std::f32::consts::PI * f * t * (1.0 + t)).sin()
        })
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn batched_forward_equals_one_by_one() {
    let device = Device::flex();
    let config = CtcModelConfig::tiny(12).with_n_mels(8);
    let model = config.init(&device).unwrap();
    let lengths = [9usize, 5, 8];
    let frames = 9;
    let data: Vec<f32> = (0..3 * frames * 8)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 5.0)
        .collect();
    let mut padded = data.clone();
    for (b, &len) in lengths.iter().enumerate() {
        for v in &mut padded[(b * frames + len) * 8..(b + 1) * frames * 8] {
            *v = 0.0;
        }
    }
    let x = Tensor::<3>::from_data(TensorData::new(padded.clone(), [3, frames, 8]), &device);
    let out = model.forward(x, &lengths).unwrap();
    assert_eq!(out.lengths, vec![5, 3, 4]);
    assert_eq!(out.logits.dims(), [3, 5, 12]);
    for (b, &len) in lengths.iter().enumerate() {
        let one = padded[b * frames * 8..(b * frames + len) * 8].to_vec();
        let x = Tensor::<3>::from_data(TensorData::new(one, [1, len, 8]), &device);
        let single = model.forward(x, &[len]).unwrap();
        let out_len = single.lengths[0];
        let batched = out.logits.clone().slice([b..b + 1, 0..out_len, 0..12]);
        let diff = max_abs_diff(&values(batched), &values(single.logits));
        assert!(diff < 1e-4, "utterance {b}: {diff}");
    }
}

#[test]
fn last_hidden_state_feeds_the_classifier() {
    let device = Device::flex();
    let model = CtcModelConfig::tiny(7)
        .with_n_mels(4)
        .init(&device)
        .unwrap();
    let x = Tensor::<3>::from_data(
        TensorData::new(
            (0..40).map(|i| (i as f32 * 0.3).sin()).collect(),
            [1, 10, 4],
        ),
        &device,
    );
    let logits = model.forward(x.clone(), &[10]).unwrap().logits;
    let (hidden, lengths) = model.hidden(x.clone(), &[10], model.n_layers()).unwrap();
    assert_eq!(lengths, vec![5]);
    let diff = max_abs_diff(&values(model.head.forward(hidden)), &values(logits));
    assert!(diff < 1e-5, "{diff}");
    // Layer 0 is the subsampled input, of the model width; layers past the stack are refused.
    let (h0, _) = model.hidden(x.clone(), &[10], 0).unwrap();
    assert_eq!(h0.dims(), [1, 5, 32]);
    assert!(model.hidden(x, &[10], model.n_layers() + 1).is_err());
}

#[test]
fn teacher_saves_loads_and_keeps_the_contract() {
    let device = Device::flex();
    let tk = tokenizer();
    let config = CtcModelConfig::tiny(tk.vocab_size());
    let model = config.init(&device).unwrap();
    let teacher = CtcTeacher::new(
        config,
        model,
        FrontendConfig::new(),
        tk,
        LayerSelection::Index(1),
    )
    .unwrap();
    assert_eq!(teacher.sample_rate(), 16000);
    assert_eq!(teacher.frame_rate(), 50.0);
    assert_eq!(teacher.dim(), 32);
    let w = wave(16000, 220.0);
    let features = teacher.features(&w).unwrap();
    assert_eq!(features.dims(), [teacher.num_frames(16000), 32]);
    assert_eq!(teacher.num_frames(16000), 51);

    let dir = tempfile::tempdir().unwrap();
    teacher.save(dir.path()).unwrap();
    let loaded = CtcTeacher::load(dir.path(), &device).unwrap();
    assert_eq!(loaded.layer(), LayerSelection::Index(1));
    let diff = max_abs_diff(&values(loaded.features(&w).unwrap()), &values(features));
    assert_eq!(diff, 0.0, "loaded teacher gives other features");
    assert_eq!(
        loaded.transcribe(&w).unwrap(),
        teacher.transcribe(&w).unwrap()
    );

    // Transcripts are the greedy decoding of the log-probabilities.
    let lp = teacher.log_probs(&w).unwrap();
    let frames = lp.dims()[0];
    let ids = greedy_decode(lp.unsqueeze_dim::<3>(0), &[frames], 0).unwrap();
    assert_eq!(
        teacher.tokenizer().decode(&ids[0]).unwrap(),
        teacher.transcribe(&w).unwrap()
    );
    // Rows of the log-probabilities are distributions.
    let lp = values(log_softmax(teacher.log_probs(&w).unwrap(), 1));
    for row in lp.chunks(teacher.tokenizer().vocab_size()) {
        let total: f32 = row.iter().map(|v| v.exp()).sum();
        assert!((total - 1.0).abs() < 1e-4);
    }

    // Batched features equal one-by-one features.
    let short = wave(7000, 330.0);
    let batch = teacher.features_batch(&[&w, &short]).unwrap();
    let alone = teacher.features(&short).unwrap();
    assert_eq!(batch[1].dims(), alone.dims());
    assert!(max_abs_diff(&values(batch[1].clone()), &values(alone)) < 1e-4);

    // The mean of all hidden states is the mean of each index.
    let mean = teacher
        .clone()
        .with_layer(LayerSelection::MeanOfAll)
        .unwrap();
    let n = teacher.model().n_layers();
    let mut sum = vec![0.0f32; 51 * 32];
    for i in 0..=n {
        let h = values(
            teacher
                .clone()
                .with_layer(LayerSelection::Index(i))
                .unwrap()
                .features(&w)
                .unwrap(),
        );
        sum.iter_mut().zip(h).for_each(|(s, v)| *s += v);
    }
    let manual: Vec<f32> = sum.iter().map(|s| s / (n + 1) as f32).collect();
    assert!(max_abs_diff(&values(mean.features(&w).unwrap()), &manual) < 1e-4);
    assert!(
        teacher
            .clone()
            .with_layer(LayerSelection::Index(n + 1))
            .is_err()
    );
    assert!(teacher.features(&[]).is_err());
}

#[test]
fn loading_a_foreign_directory_names_the_file() {
    let device = Device::flex();
    let dir = tempfile::tempdir().unwrap();
    let err = CtcTeacher::load(dir.path(), &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.json"), "{err}");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"model_type": "hubert"}"#,
    )
    .unwrap();
    let err = CtcTeacher::load(dir.path(), &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("config.json"), "{err}");
}
