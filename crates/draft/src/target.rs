//! What a draft takes from its target (`voxspec train draft`): the target checked against the
//! data, the draft's architecture, and the record of the target its checkpoint carries.

use std::path::Path;

use voxspec_mtp::{MtpConfig, MtpFile, MtpModel};

use crate::build::DraftSpec;
use crate::error::{DraftError, Result};

/// Checks that the target loaded from `dir` (`file`, `target`) is not itself a draft and reads
/// the data's `text_vocab` text tokens and `codebook` codes.
///
/// # Errors
/// [`DraftError::Target`] naming what does not fit.
pub fn check_target(
    dir: &Path,
    file: &MtpFile,
    target: &MtpModel,
    text_vocab: usize,
    codebook: usize,
) -> Result<()> {
    if file.draft.is_some() {
        return Err(DraftError::Target {
            target: dir.to_path_buf(),
            detail: format!(
                "{} is itself a draft: give the target model's run directory",
                dir.display()
            ),
        });
    }
    if target.text_vocab() != text_vocab || target.codebook_size() != codebook {
        return Err(DraftError::Target {
            target: dir.to_path_buf(),
            detail: format!(
                "the target reads {} text tokens and {} codes; the data has {text_vocab} and \
                 {codebook}",
                target.text_vocab(),
                target.codebook_size(),
            ),
        });
    }
    Ok(())
}

/// The architecture of a draft of `target` keeping `layers` (resolved target layer indices):
/// the target's, with one head and that many layers.
pub fn draft_config(target: &MtpConfig, layers: &[usize]) -> MtpConfig {
    let mut config = target.clone().with_n_heads(1);
    config.transformer = config.transformer.with_n_layers(layers.len());
    config
}

/// The record of the target a draft's checkpoint carries (`MtpFile::draft`): where it was cut
/// from, which layers, and what the target reads.
pub fn target_info(
    checkpoint: &Path,
    target: &MtpModel,
    layers: &[usize],
    spec: &DraftSpec,
) -> serde_json::Value {
    serde_json::json!({
        "checkpoint": checkpoint.display().to_string(),
        "layers": layers,
        "target_n_layers": target.transformer.n_layers(),
        "text_vocab": target.text_vocab(),
        "codebook_size": target.codebook_size(),
        "spec": spec,
    })
}
