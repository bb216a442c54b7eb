//! A semantic teacher of either kind behind one type: the CTC teacher trained here (a run
//! directory whose `config.json` has `"kind": "ctc"`) or a Hugging Face HuBERT / wav2vec2
//! checkpoint (`config.json` + `model.safetensors`), with the feature-store metadata of its
//! features.

use std::path::Path;

use burn::tensor::{Device, Tensor};

use crate::ctc::{CTC_KIND, CtcTeacher};
use crate::error::TeacherError;
use crate::feature_store::FeatureStoreMeta;
use crate::hubert::{Hubert, HubertTeacher};
use crate::teacher::{LayerSelection, SemanticTeacher};

/// The `teacher` metadata value of a feature store written from a HuBERT / wav2vec2 teacher.
pub const HUBERT_KIND: &str = "hubert";

/// Whether `dir/config.json` names a CTC teacher (`"kind": "ctc"`).
///
/// # Errors
/// [`TeacherError::ConfigRead`] or [`TeacherError::ConfigJson`] naming the file.
pub fn is_ctc_dir(dir: &Path) -> Result<bool, TeacherError> {
    let path = dir.join("config.json");
    let bytes = std::fs::read(&path).map_err(|source| TeacherError::ConfigRead {
        path: path.clone(),
        source,
    })?;
    let json: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|source| TeacherError::ConfigJson { path, source })?;
    Ok(json.get("kind").and_then(|k| k.as_str()) == Some(CTC_KIND))
}

/// A loaded teacher of either kind.
pub enum AnyTeacher {
    /// The CTC teacher trained here.
    Ctc(Box<CtcTeacher>),
    /// A HuBERT / wav2vec2 checkpoint.
    Hubert(Box<HubertTeacher>),
}

impl AnyTeacher {
    /// Loads the teacher in `dir` onto `device`, reading hidden state `layer`: by default the
    /// CTC teacher's saved feature layer, and the mean of all layers for HuBERT
    /// (SpeechTokenizer's target).
    ///
    /// # Errors
    /// [`TeacherError::ConfigRead`] / [`TeacherError::ConfigJson`] for an unreadable
    /// `config.json`, [`TeacherError::Load`] naming the directory, and
    /// [`TeacherError::LayerOutOfRange`] for a layer the model does not have.
    pub fn load(
        dir: &Path,
        layer: Option<LayerSelection>,
        device: &Device,
    ) -> Result<Self, TeacherError> {
        let loading = |kind: &'static str| {
            move |e: TeacherError| TeacherError::Load {
                kind,
                dir: dir.to_path_buf(),
                source: Box::new(e),
            }
        };
        if is_ctc_dir(dir)? {
            let mut teacher = CtcTeacher::load(dir, device).map_err(loading("CTC"))?;
            if let Some(layer) = layer {
                teacher = teacher.with_layer(layer)?;
            }
            Ok(Self::Ctc(Box::new(teacher)))
        } else {
            let layer = layer.unwrap_or(LayerSelection::MeanOfAll);
            let model = Hubert::load(dir, device).map_err(loading("HuBERT"))?;
            Ok(Self::Hubert(Box::new(HubertTeacher::new(model, layer)?)))
        }
    }

    /// The teacher as a [`SemanticTeacher`].
    pub fn as_teacher(&self) -> &dyn SemanticTeacher {
        match self {
            Self::Ctc(t) => t.as_ref(),
            Self::Hubert(t) => t.as_ref(),
        }
    }

    /// The `teacher` metadata value of its feature stores: [`CTC_KIND`] or [`HUBERT_KIND`].
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Ctc(_) => CTC_KIND,
            Self::Hubert(_) => HUBERT_KIND,
        }
    }

    /// The hidden state(s) its features are.
    pub fn layer(&self) -> LayerSelection {
        match self {
            Self::Ctc(t) => t.layer(),
            Self::Hubert(t) => t.layer(),
        }
    }

    /// The metadata of a feature store of its features.
    pub fn store_meta(&self) -> FeatureStoreMeta {
        let t = self.as_teacher();
        FeatureStoreMeta {
            dim: t.dim(),
            frame_rate: t.frame_rate(),
            sample_rate: t.sample_rate(),
            teacher: self.kind().into(),
            layer: self.layer().to_string(),
        }
    }

    /// Features of several waveforms (batched for the CTC teacher).
    ///
    /// # Shapes
    /// - `waves`: `[n][samples_i]` at the teacher's sample rate → `n` tensors
    ///   `[frames_i, dim]` on the teacher's device
    ///
    /// # Errors
    /// When a waveform is shorter than the teacher's receptive field.
    pub fn features(&self, waves: &[&[f32]]) -> Result<Vec<Tensor<2>>, TeacherError> {
        match self {
            Self::Ctc(t) => t.features_batch(waves),
            Self::Hubert(t) => waves.iter().map(|w| t.features(w)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_kind_tells_a_ctc_teacher_and_a_bad_config_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.json");
        assert!(
            is_ctc_dir(dir.path())
                .unwrap_err()
                .to_string()
                .starts_with("reading ")
        );
        std::fs::write(&config, "{\"kind\": \"ctc\"}").unwrap();
        assert!(is_ctc_dir(dir.path()).unwrap());
        std::fs::write(&config, "{\"model_type\": \"hubert\"}").unwrap();
        assert!(!is_ctc_dir(dir.path()).unwrap());
        std::fs::write(&config, "not json").unwrap();
        let err = is_ctc_dir(dir.path()).unwrap_err().to_string();
        assert!(err.ends_with("config.json is not JSON"), "{err}");
    }
}
