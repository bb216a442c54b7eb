//! Drafts: layer selection and its errors, and fine-tuning that moves exactly the trained tensors.

use std::collections::BTreeMap;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_draft::{DistillConfig, DraftSpec, DraftTask, build_draft};
use voxspec_mtp::{MtpConfig, MtpData, MtpModel};
use voxspec_train::{OptimConfig, TrainConfig, Trainer};

/// Every float parameter's values by path.
fn params<M: Module>(model: &M) -> BTreeMap<String, Vec<f32>> {
    struct Collect {
        path: Vec<String>,
        out: BTreeMap<String, Vec<f32>>,
    }
    impl ModuleVisitor for Collect {
        fn enter_module(&mut self, name: &str, _: &str) {
            self.path.push(name.to_string());
        }
        fn exit_module(&mut self, _: &str, _: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let values = param.val().into_data().try_into_vec::<f32>().expect("f32");
            self.out.insert(self.path.join("."), values);
        }
    }
    let mut c = Collect {
        path: Vec::new(),
        out: BTreeMap::new(),
    };
    model.visit(&mut c);
    c.out
}

fn target(n_layers: usize, device: &Device) -> MtpModel {
    device.seed(11);
    let mut config = MtpConfig::tiny(8, 6);
    config.transformer = config.transformer.with_n_layers(n_layers);
    config.init(device).expect("target")
}

#[test]
fn layer_selection_resolves_and_refuses_bad_specs() {
    let spec = DraftSpec::parse("0,1,-2,-1").expect("parse");
    assert_eq!(spec.resolve(6).expect("resolve"), vec![0, 1, 4, 5]);
    assert_eq!(spec.trained_layers().expect("trained"), vec![0, 1]);
    let err = spec.resolve(4).unwrap_err().to_string();
    assert!(err.contains("not shorter than its target of 4"), "{err}");
    let err = DraftSpec::parse("0,9")
        .expect("parse")
        .resolve(6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("layer 9 does not exist"), "{err}");
    let err = DraftSpec::parse("0,-6")
        .expect("parse")
        .resolve(6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("selected twice"), "{err}");
    assert!(DraftSpec::parse("0,x").is_err());
    assert!(DraftSpec::parse("").is_err());
    let explicit = DraftSpec {
        layers: vec![0, -1],
        train_layers: Some(vec![2]),
    };
    assert!(explicit.trained_layers().is_err());
}

#[test]
fn draft_copies_the_selected_target_layers() {
    let device = Device::flex();
    let target = target(4, &device);
    let draft = build_draft(&target, &DraftSpec::parse("0,-1").expect("spec")).expect("draft");
    assert_eq!(draft.transformer.n_layers(), 2);
    assert_eq!(draft.n_heads(), 1);
    let t = params(&target);
    let d = params(&draft);
    for (path, values) in &d {
        let source = path
            .replace("transformer.blocks.1.", "transformer.blocks.3.")
            .to_string();
        assert_eq!(
            Some(values),
            t.get(&source),
            "{path} is not a copy of {source}"
        );
    }
}

#[test]
fn fine_tuning_moves_only_the_trained_tensors() {
    let device = Device::flex().autodiff();
    let target = target(4, &device).no_grad();
    let spec = DraftSpec::parse("0,-1").expect("spec");
    let config = MtpConfig::tiny(8, 6).with_n_heads(1);
    let items: Vec<TtsItem> = (0..6u32)
        .map(|i| TtsItem {
            id: format!("u{i}"),
            speaker: "s".into(),
            text: vec![1 + i % 3, 4],
            codes: Codes::new(1, 5, (0..5).map(|j| (i + j) % 6).collect()).expect("codes"),
            durations: None,
        })
        .collect();
    let bucket = BucketConfig {
        max_items: 3,
        max_padded_len: 512,
        shuffle: true,
        seed: 2,
    };
    let task = DraftTask {
        target: target.clone(),
        spec: spec.clone(),
        distill: DistillConfig {
            weight: 0.5,
            temperature: 2.0,
        },
        train: MtpData::new(&items, &config, bucket),
        valid: None,
        target_info: serde_json::json!({ "checkpoint": "in-memory" }),
    };
    let train = TrainConfig {
        seed: 1,
        max_steps: 6,
        optimizer: OptimConfig {
            lr: 1e-2,
            warmup_steps: 0,
            ..OptimConfig::default()
        },
        freeze: spec.freeze_patterns().expect("patterns"),
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let outcome = Trainer::new(train, task, dir.path(), &device)
        .run(&mut ())
        .expect("training");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    assert!(
        records
            .iter()
            .all(|r| r.values["kl"].is_finite() && r.values["kl"] >= 0.0)
    );

    let before = params(&build_draft(&target, &spec).expect("draft"));
    let after = params(&outcome.model);
    let mut moved = Vec::new();
    for (path, values) in &after {
        let trained = path.starts_with("transformer.blocks.0.") || path.starts_with("heads.");
        if trained {
            if values != &before[path] {
                moved.push(path.clone());
            }
        } else {
            assert_eq!(values, &before[path], "frozen tensor {path} changed");
        }
    }
    assert!(
        moved.iter().any(|p| p.starts_with("transformer.blocks.0.")),
        "{moved:?}"
    );
    assert!(moved.iter().any(|p| p.starts_with("heads.0.")), "{moved:?}");
}

#[test]
fn a_draft_with_everything_frozen_is_refused() {
    let device = Device::flex().autodiff();
    let target = target(3, &device).no_grad();
    let spec = DraftSpec {
        layers: vec![0],
        train_layers: Some(vec![]),
    };
    let config = MtpConfig::tiny(8, 6).with_n_heads(1);
    let items = vec![TtsItem {
        id: "u".into(),
        speaker: "s".into(),
        text: vec![1],
        codes: Codes::new(1, 3, vec![0, 1, 2]).expect("codes"),
        durations: None,
    }];
    let bucket = BucketConfig {
        max_items: 1,
        max_padded_len: 64,
        shuffle: false,
        seed: 0,
    };
    let task = DraftTask {
        target,
        spec: spec.clone(),
        distill: DistillConfig::default(),
        train: MtpData::new(&items, &config, bucket),
        valid: None,
        target_info: serde_json::Value::Null,
    };
    let mut freeze = spec.freeze_patterns().expect("patterns");
    freeze.push(r"^heads\.".into());
    let train = TrainConfig {
        max_steps: 1,
        freeze,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let err = Trainer::new(train, task, dir.path(), &device)
        .run(&mut ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no trainable parameter"), "{err}");
}
