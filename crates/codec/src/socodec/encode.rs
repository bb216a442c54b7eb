//! Encoding audio with a SoCodec: the teacher whose hidden states the codec reads, checked
//! against it, the features it gives a waveform (the input of [`SoCodec::encode_features`]),
//! and the metadata of a codes file of the tokens.

use std::collections::HashMap;
use std::path::Path;

use voxspec_teacher::SemanticTeacher;

#[cfg(doc)]
use super::SoCodec;
use super::{SOCODEC_KIND, SoCodecConfig};
use crate::error::CodecError;

/// Checks that `teacher` (loaded from `dir`) gives features as wide as the codec reads.
///
/// # Errors
/// [`CodecError::TeacherDim`] naming the directory and both widths.
pub fn check_feature_teacher(
    config: &SoCodecConfig,
    teacher: &dyn SemanticTeacher,
    dir: &Path,
) -> Result<(), CodecError> {
    if teacher.dim() != config.feature_dim {
        return Err(CodecError::TeacherDim {
            dir: dir.to_path_buf(),
            found: teacher.dim(),
            expected: config.feature_dim,
        });
    }
    Ok(())
}

/// Raw teacher features of a waveform.
///
/// # Shapes
/// - `samples`: `[n]` at the teacher's sample rate → `[frames, dim]` row-major
///
/// # Errors
/// The teacher's errors (a waveform shorter than its receptive field);
/// [`CodecError::TensorRead`].
pub fn teacher_features(
    teacher: &dyn SemanticTeacher,
    samples: &[f32],
) -> Result<Vec<f32>, CodecError> {
    teacher
        .features(samples)?
        .into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| CodecError::TensorRead {
            what: "teacher features",
            reason: format!("{e:?}"),
        })
}

/// The metadata of a codes file of the codec's tokens of `samples` samples of audio at
/// `sample_rate`: kind, rates, a stream's vocabulary and the sample count.
pub fn codes_meta(
    config: &SoCodecConfig,
    sample_rate: u32,
    samples: usize,
) -> HashMap<String, String> {
    HashMap::from([
        ("kind".to_string(), SOCODEC_KIND.to_string()),
        ("sample_rate".to_string(), sample_rate.to_string()),
        (
            "frame_rate".to_string(),
            (1000.0 / config.frame_ms as f32).to_string(),
        ),
        (
            "codebook_size".to_string(),
            config.stream_vocab().to_string(),
        ),
        ("samples".to_string(), samples.to_string()),
    ])
}
