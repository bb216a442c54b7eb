//! The directory format of a codec trained here (`voxspec codec train`):
//!
//! ```text
//! <dir>/config.json        { "kind": "speechtokenizer", "voxspec_version": ..., "model": {...} }
//! <dir>/model.safetensors  the weights (module paths as tensor names)
//! ```
//!
//! (A pretrained SpeechTokenizer checkpoint in its own layout is read by the loader module.)

use std::path::Path;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_train::weights::WEIGHTS_FILE;
use voxspec_train::{
    TrainError, load_weights, read_model_config, save_weights, write_model_config,
};

use crate::speechtokenizer::{SpeechTokenizer, SpeechTokenizerConfig};

/// The `kind` of a codec model directory's `config.json`.
pub const CODEC_KIND: &str = "speechtokenizer";

/// The `config.json` body of a codec model directory (besides `kind` and `voxspec_version`).
#[derive(Debug, Serialize, Deserialize)]
struct CodecFile {
    model: SpeechTokenizerConfig,
}

/// Writes `model` with its config as a codec model directory (the weights atomically).
///
/// # Errors
/// The training crate's file errors, naming the file.
pub fn save_codec(
    dir: &Path,
    config: &SpeechTokenizerConfig,
    model: &SpeechTokenizer,
) -> voxspec_train::Result<()> {
    write_model_config(
        dir,
        CODEC_KIND,
        &CodecFile {
            model: config.clone(),
        },
    )?;
    save_weights(model, &dir.join(WEIGHTS_FILE))
}

/// Loads a codec model directory written by [`save_codec`] onto `device`, strictly (every
/// tensor present, none extra, shapes equal).
///
/// # Errors
/// The training crate's errors naming the file (missing, another kind, mismatching tensors),
/// or [`TrainError::Task`] for a config that cannot build a model.
pub fn load_codec(
    dir: &Path,
    device: &Device,
) -> voxspec_train::Result<(SpeechTokenizerConfig, SpeechTokenizer)> {
    let (_, file): (String, CodecFile) = read_model_config(dir, &[CODEC_KIND])?;
    let model = file.model.init(device).map_err(TrainError::task)?;
    let model = load_weights(model, &dir.join(WEIGHTS_FILE))?;
    Ok((file.model, model))
}

/// The model config of a codec model directory written by [`save_codec`], without loading the
/// weights.
///
/// # Errors
/// The training crate's errors naming the file (missing, another kind, malformed).
pub fn read_codec_config(dir: &Path) -> voxspec_train::Result<SpeechTokenizerConfig> {
    let (_, file): (String, CodecFile) = read_model_config(dir, &[CODEC_KIND])?;
    Ok(file.model)
}
