//! Model directories of the AR (MTP), draft and NAR models: `config.json` (kind + config) and
//! `model.safetensors`, written with `voxspec_train::weights` (atomic, strict on load).
//!
//! ```text
//! kind "mtp"    {model: MtpConfig}                      the AR model with its heads
//! kind "draft"  {model: MtpConfig, draft: {...}}        a draft: fewer layers, one head, and
//!                                                       where it came from (target, layers)
//! kind "nar"    {model: NarConfig}
//! ```
//!
//! Tensor names are the module paths: `embedding.weight` `[text_vocab + 1 + codebook, d]`,
//! `transformer.blocks.{i}.{attention_norm,attention.qkv,attention.out,mlp_norm,mlp.{up,gate,down}}`,
//! `transformer.norm`, `heads.{i}.residual.{weight,bias}` (heads ≥ 1), `heads.{i}.out.{weight,bias}`.
//! Linear weights are stored `[in, out]` (Burn's layout; PyTorch's is the transpose).

use std::path::Path;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_train::{load_weights, read_model_config, save_weights, write_model_config};

use crate::error::Result;
use crate::model::{MtpConfig, MtpModel};
use crate::nar::{NarConfig, NarModel};

/// Kind of an AR model directory.
pub const MTP_KIND: &str = "mtp";
/// Kind of a draft model directory.
pub const DRAFT_KIND: &str = "draft";
/// Kind of a NAR model directory.
pub const NAR_KIND: &str = "nar";
const WEIGHTS: &str = "model.safetensors";

/// `config.json` of an AR or draft model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MtpFile {
    /// The architecture.
    pub model: MtpConfig,
    /// For drafts: the target it was cut from and its layer selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<serde_json::Value>,
}

/// `config.json` of a NAR model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NarFile {
    /// The architecture.
    pub model: NarConfig,
}

/// Writes an AR model (`draft: None`, kind "mtp") or a draft (kind "draft") into `dir`.
///
/// # Errors
/// I/O or serialisation errors naming the file.
pub fn save_mtp(dir: &Path, file: &MtpFile, model: &MtpModel) -> Result<()> {
    let kind = if file.draft.is_some() {
        DRAFT_KIND
    } else {
        MTP_KIND
    };
    write_model_config(dir, kind, file)?;
    save_weights(model, &dir.join(WEIGHTS))?;
    Ok(())
}

/// Loads an AR or draft model from `dir` onto `device`; returns its file and the model.
///
/// # Errors
/// A missing directory or file, a checkpoint of another kind (named), or weights that do not
/// fit the config (every differing tensor named with its shapes).
pub fn load_mtp(dir: &Path, device: &Device) -> Result<(MtpFile, MtpModel)> {
    let (_, file): (String, MtpFile) = read_model_config(dir, &[MTP_KIND, DRAFT_KIND])?;
    let model = load_weights(file.model.init(device)?, &dir.join(WEIGHTS))?;
    Ok((file, model))
}

/// Writes a NAR model into `dir`.
///
/// # Errors
/// I/O or serialisation errors naming the file.
pub fn save_nar(dir: &Path, config: &NarConfig, model: &NarModel) -> Result<()> {
    write_model_config(
        dir,
        NAR_KIND,
        &NarFile {
            model: config.clone(),
        },
    )?;
    save_weights(model, &dir.join(WEIGHTS))?;
    Ok(())
}

/// Loads a NAR model from `dir` onto `device`.
///
/// # Errors
/// As [`load_mtp`].
pub fn load_nar(dir: &Path, device: &Device) -> Result<(NarConfig, NarModel)> {
    let (_, file): (String, NarFile) = read_model_config(dir, &[NAR_KIND])?;
    let model = load_weights(file.model.init(device)?, &dir.join(WEIGHTS))?;
    Ok((file.model, model))
}
