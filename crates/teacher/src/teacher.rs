//! Semantic teachers: frozen speech models whose frame features a codec distils into its
//! first quantizer (SpeechTokenizer, Zhang et al. 2024, §3.2 "semantic distillation").
//!
//! A teacher maps a mono waveform at [`SemanticTeacher::sample_rate`] to a `[frames, dim]`
//! feature matrix at [`SemanticTeacher::frame_rate`]. HuBERT ([`crate::HubertTeacher`]) and the
//! CTC recogniser trained here ([`crate::CtcTeacher`]) implement it.

use burn::tensor::Tensor;

use crate::error::TeacherError;

/// Which hidden state(s) of a transformer teacher become the features.
///
/// Hidden states are numbered as in Hugging Face's `output_hidden_states=True`: index 0 is the
/// transformer input (after the positional convolution and, for post-norm models, the encoder
/// layer norm); index `i ≥ 1` is the output of transformer layer `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerSelection {
    /// One hidden state, `0..=num_hidden_layers`.
    Index(usize),
    /// The mean over all `num_hidden_layers + 1` hidden states (SpeechTokenizer's teacher:
    /// the average of all HuBERT-base layers).
    MeanOfAll,
}

impl std::str::FromStr for LayerSelection {
    type Err = std::num::ParseIntError;

    /// `mean` (any case) for [`LayerSelection::MeanOfAll`], else an index.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("mean") {
            return Ok(Self::MeanOfAll);
        }
        s.parse().map(Self::Index)
    }
}

impl std::fmt::Display for LayerSelection {
    /// The index, or `mean`: the `layer` of a feature store's metadata.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Index(i) => write!(f, "{i}"),
            Self::MeanOfAll => f.write_str("mean"),
        }
    }
}

/// A frozen model that turns a waveform into frame-level semantic features.
pub trait SemanticTeacher {
    /// Sample rate (Hz) the waveform passed to [`SemanticTeacher::features`] must have.
    fn sample_rate(&self) -> u32;

    /// Feature frames per second.
    fn frame_rate(&self) -> f32;

    /// Feature dimension `D`.
    fn dim(&self) -> usize;

    /// Number of feature frames produced for a waveform of `samples` samples (0 when too short).
    fn num_frames(&self, samples: usize) -> usize;

    /// Features of one mono waveform.
    ///
    /// # Shapes
    /// - `wave`: `[samples]` at [`SemanticTeacher::sample_rate`]
    /// - returns: `[frames, dim]` with `frames = self.num_frames(samples)`, on the teacher's
    ///   device
    ///
    /// # Errors
    /// When the waveform is shorter than the teacher's receptive field.
    fn features(&self, wave: &[f32]) -> Result<Tensor<2>, TeacherError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_read_and_print_as_feature_stores_name_them() {
        for (text, layer) in [
            ("4", LayerSelection::Index(4)),
            ("mean", LayerSelection::MeanOfAll),
        ] {
            assert_eq!(text.parse::<LayerSelection>().unwrap(), layer);
            assert_eq!(layer.to_string(), text);
        }
        assert_eq!(
            "MEAN".parse::<LayerSelection>().unwrap(),
            LayerSelection::MeanOfAll
        );
        assert!("last".parse::<LayerSelection>().is_err());
    }
}
