//! Weight files: equal weights give equal bytes (a checkpoint can be compared or
//! content-addressed), and a save / load round trip keeps every value.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use voxspec_train::{load_weights, save_weights};

#[derive(Module, Debug)]
struct Two {
    first: Linear,
    second: Linear,
}

fn model(device: &Device) -> Two {
    Two {
        first: LinearConfig::new(3, 4).init(device),
        second: LinearConfig::new(4, 2).init(device),
    }
}

#[test]
fn equal_weights_give_equal_files() {
    let device = Device::default();
    let dir = tempfile::tempdir().unwrap();
    let a = model(&device);
    let mut files = Vec::new();
    // Several saves: an unordered map in the header would give different bytes on some of them.
    for i in 0..8 {
        let path = dir.path().join(format!("m{i}.safetensors"));
        save_weights(&a, &path).unwrap();
        files.push(std::fs::read(&path).unwrap());
    }
    for (i, f) in files.iter().enumerate().skip(1) {
        assert_eq!(f, &files[0], "save {i} differs from save 0");
    }
    let b = load_weights(model(&device), &dir.path().join("m0.safetensors")).unwrap();
    let x = Tensor::<2>::ones([1, 3], &device);
    let out = |m: &Two| {
        m.second
            .forward(m.first.forward(x.clone()))
            .into_data()
            .try_to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(out(&a), out(&b));
}

/// `model_kind` reads the kind `write_model_config` wrote, and gives none for a directory
/// without a config, a config that is not JSON, or one without a kind.
#[test]
fn model_kind_reads_what_write_model_config_wrote() {
    use voxspec_train::weights::{model_kind, write_model_config};
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    assert_eq!(model_kind(&model), None, "no directory");
    write_model_config(&model, "vocoder", &serde_json::json!({ "dim": 4 })).unwrap();
    assert_eq!(model_kind(&model).as_deref(), Some("vocoder"));
    std::fs::write(model.join("config.json"), "{ not json").unwrap();
    assert_eq!(model_kind(&model), None, "not JSON");
    std::fs::write(model.join("config.json"), r#"{"dim": 4}"#).unwrap();
    assert_eq!(model_kind(&model), None, "no kind");
}
