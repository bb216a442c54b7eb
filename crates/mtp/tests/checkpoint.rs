//! Model directories: saved == loaded, and every way a directory can be wrong is named.

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_mtp::{MtpConfig, MtpFile, NarConfig, load_mtp, load_nar, save_mtp, save_nar};

fn ids() -> Tensor<2, Int> {
    Tensor::from_data(
        TensorData::new(vec![1i64, 2, 6, 8, 9], [1, 5]),
        &Device::flex(),
    )
}

#[test]
fn saved_models_load_back_identical() {
    let device = Device::flex();
    device.seed(9);
    let config = MtpConfig::tiny(6, 5);
    let model = config.init(&device).expect("model");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = MtpFile {
        model: config,
        draft: None,
    };
    save_mtp(dir.path(), &file, &model).expect("save");
    let (loaded_file, loaded) = load_mtp(dir.path(), &device).expect("load");
    assert_eq!(loaded_file.model.n_heads, 4);
    let a = model.forward(ids(), None).expect("forward");
    let b = loaded.forward(ids(), None).expect("forward");
    for (x, y) in a.into_iter().zip(b) {
        let x = x.into_data().try_into_vec::<f32>().expect("f32");
        let y = y.into_data().try_into_vec::<f32>().expect("f32");
        assert_eq!(x, y);
    }

    let nar_config = NarConfig::tiny(6, 5, 3);
    let nar = nar_config.init(&device).expect("nar");
    let nar_dir = tempfile::tempdir().expect("tempdir");
    save_nar(nar_dir.path(), &nar_config, &nar).expect("save nar");
    let (c, _) = load_nar(nar_dir.path(), &device).expect("load nar");
    assert_eq!(c.n_q, 3);

    // A NAR directory is not an AR model, and the reverse.
    let err = load_mtp(nar_dir.path(), &device).unwrap_err().to_string();
    assert!(err.contains("\"nar\"") && err.contains("\"mtp\""), "{err}");
    let err = load_nar(dir.path(), &device).unwrap_err().to_string();
    assert!(err.contains("\"mtp\"") && err.contains("\"nar\""), "{err}");
}

#[test]
fn weights_that_do_not_fit_the_config_are_named() {
    let device = Device::flex();
    let config = MtpConfig::tiny(6, 5);
    let model = config.init(&device).expect("model");
    let dir = tempfile::tempdir().expect("tempdir");
    save_mtp(
        dir.path(),
        &MtpFile {
            model: config.clone(),
            draft: None,
        },
        &model,
    )
    .expect("save");
    // Edit the config: a wider MLP and one head fewer than the weights hold.
    let path = dir.path().join("config.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    json["model"]["transformer"]["d_ff"] = 80.into();
    json["model"]["n_heads"] = 3.into();
    std::fs::write(&path, serde_json::to_vec(&json).expect("json")).expect("write");
    let err = load_mtp(dir.path(), &device).unwrap_err().to_string();
    assert!(err.contains("transformer.blocks.0.mlp.up.weight"), "{err}");
    assert!(
        err.contains("[32, 80]") && err.contains("[32, 64]"),
        "{err}"
    );
    assert!(err.contains("not in the model: heads.3"), "{err}");

    let missing = tempfile::tempdir().expect("tempdir");
    let err = load_mtp(missing.path(), &device).unwrap_err().to_string();
    assert!(err.contains("config.json"), "{err}");
}
