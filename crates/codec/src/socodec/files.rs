//! The directory format of a SoCodec trained here (`voxspec codec train --kind socodec`):
//!
//! ```text
//! <dir>/config.json        { "kind": "socodec", "voxspec_version": ..., "model": {...} }
//! <dir>/model.safetensors  the codec's weights (no discriminator)
//! ```

use std::path::Path;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_train::weights::WEIGHTS_FILE;
use voxspec_train::{
    TrainError, load_weights, read_model_config, save_weights, write_model_config,
};

use super::{SoCodec, SoCodecConfig};

/// The `kind` of a SoCodec model directory's `config.json`.
pub const SOCODEC_KIND: &str = "socodec";

#[derive(Debug, Serialize, Deserialize)]
struct SoCodecFile {
    model: SoCodecConfig,
}

/// Writes `model` with its config as a SoCodec model directory (the weights atomically).
///
/// # Errors
/// The training crate's file errors, naming the file.
pub fn save_socodec(
    dir: &Path,
    config: &SoCodecConfig,
    model: &SoCodec,
) -> voxspec_train::Result<()> {
    write_model_config(
        dir,
        SOCODEC_KIND,
        &SoCodecFile {
            model: config.clone(),
        },
    )?;
    save_weights(model, &dir.join(WEIGHTS_FILE))
}

/// Loads a directory written by [`save_socodec`] onto `device`, strictly.
///
/// # Errors
/// The training crate's errors naming the file (missing, another kind, mismatching tensors),
/// or [`TrainError::Task`] for a config that cannot build a model.
pub fn load_socodec(
    dir: &Path,
    device: &Device,
) -> voxspec_train::Result<(SoCodecConfig, SoCodec)> {
    let (_, file): (String, SoCodecFile) = read_model_config(dir, &[SOCODEC_KIND])?;
    let model = file.model.init(device).map_err(TrainError::task)?;
    let model = load_weights(model, &dir.join(WEIGHTS_FILE))?;
    Ok((file.model, model))
}
