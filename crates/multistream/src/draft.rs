//! Drafts for speculative decoding over frames, cut from a trained multi-stream LM's layers as
//! the single-stream drafts are (`voxspec_draft`): the draft keeps some target layers with the
//! target's embeddings, voice projection, step track and heads; the lower layers and the heads
//! train, everything else stays frozen.

use voxspec_draft::DraftSpec;

use crate::error::{MultiStreamError, Result};
use crate::model::{MultiStreamConfig, MultiStreamModel};

/// The draft of `spec`'s layers of `target` and its config.
///
/// # Errors
/// [`MultiStreamError::InvalidConfig`] for a bad layer selection (named).
pub fn cut_draft(
    target: &MultiStreamModel,
    config: &MultiStreamConfig,
    spec: &DraftSpec,
) -> Result<(MultiStreamConfig, MultiStreamModel)> {
    let bad = |e: voxspec_draft::DraftError| MultiStreamError::InvalidConfig {
        detail: e.to_string(),
    };
    let layers = spec.resolve(target.transformer.n_layers()).map_err(bad)?;
    spec.trained_layers().map_err(bad)?;
    let mut draft_config = config.clone();
    draft_config.transformer = draft_config.transformer.with_n_layers(layers.len());
    // A draft proposes one step per forward: the target's extra heads stay behind.
    draft_config.mtp = None;
    let model = MultiStreamModel {
        transformer: target.transformer.select_layers(&layers)?,
        ahead: Vec::new(),
        ..target.clone()
    };
    Ok((draft_config, model))
}

/// Regexes over the draft's parameter paths (for `TrainConfig::freeze`): everything but the
/// trained layers and the heads.
///
/// # Errors
/// [`MultiStreamError::InvalidConfig`] when an explicit trained layer is not a draft layer.
pub fn draft_freeze_patterns(spec: &DraftSpec) -> Result<Vec<String>> {
    let trained = spec
        .trained_layers()
        .map_err(|e| MultiStreamError::InvalidConfig {
            detail: e.to_string(),
        })?;
    let mut patterns: Vec<String> = [
        r"^text_embedding\.",
        r"^stream_embeddings\.",
        r"^segment_embedding\.",
        r"^voice_projection\.",
        r"^track\.",
        r"^duration\.",
        r"^transformer\.norm\.",
        r"^transformer\.positions\.",
    ]
    .map(String::from)
    .into();
    patterns.extend(
        (0..spec.layers.len())
            .filter(|d| !trained.contains(d))
            .map(|d| format!(r"^transformer\.blocks\.{d}\.")),
    );
    Ok(patterns)
}
