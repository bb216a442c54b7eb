//! Model directories of the multi-stream LM: `config.json` (kind `multistream`, or
//! `multistream-draft` for a draft cut from a target's layers) and `model.safetensors`; a
//! model with multi-token heads also keeps one transition matrix per stream for Viterbi
//! decoding (`transitions-<j>.safetensors`, from its training tokens).

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_train::{load_weights, read_model_config, save_weights, write_model_config};

use voxspec_infer::Transitions;

use crate::error::{MultiStreamError, Result};
use crate::model::{MultiStreamConfig, MultiStreamModel};

/// The `kind` of a target model directory.
pub const MULTISTREAM_KIND: &str = "multistream";
/// The `kind` of a draft model directory.
pub const MULTISTREAM_DRAFT_KIND: &str = "multistream-draft";
const WEIGHTS: &str = "model.safetensors";

/// What `config.json` holds besides the kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MsFile {
    /// The architecture.
    pub model: MultiStreamConfig,
    /// The codec whose tokens the model reads (its directory as given in training), so
    /// synthesis can decode them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<String>,
    /// For drafts: the target it was cut from and its layer selection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<serde_json::Value>,
}

/// Writes a multi-stream LM (or draft) into `dir` (atomically, file by file).
///
/// # Errors
/// I/O or serialisation errors naming the file.
pub fn save_multistream(dir: &Path, file: &MsFile, model: &MultiStreamModel) -> Result<()> {
    let kind = if file.draft.is_some() {
        MULTISTREAM_DRAFT_KIND
    } else {
        MULTISTREAM_KIND
    };
    write_model_config(dir, kind, file)?;
    save_weights(model, &dir.join(WEIGHTS))?;
    Ok(())
}

/// Loads a multi-stream LM or draft from `dir` onto `device`.
///
/// # Errors
/// A missing directory or file, a checkpoint of another kind (named), or weights that do not
/// fit the config (every differing tensor named with its shapes).
pub fn load_multistream(dir: &Path, device: &Device) -> Result<(MsFile, MultiStreamModel)> {
    let (_, file): (String, MsFile) =
        read_model_config(dir, &[MULTISTREAM_KIND, MULTISTREAM_DRAFT_KIND])?;
    let model = load_weights(file.model.init(device)?, &dir.join(WEIGHTS))?;
    Ok((file, model))
}

/// Where stream `j`'s transition matrix lives in a model directory.
pub fn transitions_path(dir: &Path, j: usize) -> PathBuf {
    dir.join(format!("transitions-{j}.safetensors"))
}

/// Writes one transition matrix per stream into `dir`.
///
/// # Errors
/// I/O errors naming the file.
pub fn save_stream_transitions(dir: &Path, transitions: &[Transitions]) -> Result<()> {
    for (j, q) in transitions.iter().enumerate() {
        q.save(&transitions_path(dir, j))?;
    }
    Ok(())
}

/// The `streams` transition matrices of `dir`, or `None` when it has none.
///
/// # Errors
/// A directory holding some but not all of them (the first missing one named), or a file that
/// is not a transition matrix.
pub fn load_stream_transitions(dir: &Path, streams: usize) -> Result<Option<Vec<Transitions>>> {
    if !transitions_path(dir, 0).is_file() {
        return Ok(None);
    }
    (0..streams)
        .map(|j| {
            let path = transitions_path(dir, j);
            if !path.is_file() {
                return Err(MultiStreamError::InvalidInput {
                    detail: format!(
                        "{} is missing: a model of {streams} streams needs one transition \
                         matrix per stream",
                        path.display()
                    ),
                });
            }
            Ok(Transitions::load(&path)?)
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}
