//! Greedy (best-path) CTC decoding: the most likely class in every frame, repeats collapsed,
//! blanks dropped (Graves et al. 2006, §3.2 "best path decoding").
//!
//! ```text
//! frames  : a a ∅ a b b ∅ ∅ c
//! collapse: a   ∅ a b   ∅   c
//! drop ∅  : a     a b       c   → "aabc"
//! ```

use burn::tensor::Tensor;

use super::host_i64;
use crate::error::TeacherError;

/// Collapses a frame-wise label path: merge runs of equal labels, then remove `blank`.
pub fn collapse_path(path: &[u32], blank: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut prev = None;
    for &label in path {
        if Some(label) != prev && label != blank {
            out.push(label);
        }
        prev = Some(label);
    }
    out
}

/// Best-path decoding of a padded batch.
///
/// # Shapes
/// - `scores`: `[batch, frames, classes]` (logits or log-probabilities; only the argmax matters)
/// - `lengths`: `[batch]` valid frames per utterance, each `≤ frames`
/// - returns: `batch` label sequences without blanks
///
/// # Errors
/// [`TeacherError::InvalidInput`] when `lengths` does not match the batch or exceeds `frames`;
/// [`TeacherError::TensorRead`] if the argmax cannot be read back.
pub fn greedy_decode(
    scores: Tensor<3>,
    lengths: &[usize],
    blank: u32,
) -> Result<Vec<Vec<u32>>, TeacherError> {
    let [batch, frames, _] = scores.dims();
    if lengths.len() != batch || lengths.iter().any(|&l| l > frames) {
        return Err(TeacherError::InvalidInput {
            what: "greedy_decode lengths",
            reason: format!("{lengths:?} for a batch of {batch} × {frames} frames"),
        });
    }
    // [batch, frames, 1] → [batch * frames]
    let best = host_i64(scores.argmax(2).into_data(), "ctc argmax")?;
    Ok(lengths
        .iter()
        .enumerate()
        .map(|(b, &len)| {
            let path: Vec<u32> = best[b * frames..b * frames + len]
                .iter()
                .map(|&k| k as u32)
                .collect();
            collapse_path(&path, blank)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::{Device, TensorData};

    #[test]
    fn collapse_merges_repeats_and_drops_blanks() {
        // a a ∅ a b b ∅ ∅ c with ∅ = 0
        assert_eq!(
            collapse_path(&[1, 1, 0, 1, 2, 2, 0, 0, 3], 0),
            vec![1, 1, 2, 3]
        );
        assert_eq!(collapse_path(&[0, 0, 0], 0), Vec::<u32>::new());
        assert_eq!(collapse_path(&[], 0), Vec::<u32>::new());
        assert_eq!(collapse_path(&[2, 2, 2], 0), vec![2]);
        // A different blank id.
        assert_eq!(collapse_path(&[0, 3, 0, 0], 3), vec![0, 0]);
    }

    #[test]
    fn greedy_decode_respects_lengths() {
        let device = Device::flex();
        // batch 2, 4 frames, 3 classes; one-hot-ish scores.
        let best = [[1, 1, 0, 2], [2, 0, 2, 1]];
        let mut data = Vec::new();
        for row in best {
            for k in row {
                for c in 0..3 {
                    data.push(if c == k { 1.0f32 } else { 0.0 });
                }
            }
        }
        let scores = Tensor::<3>::from_data(TensorData::new(data, [2, 4, 3]), &device);
        let out = greedy_decode(scores, &[4, 3], 0).unwrap();
        assert_eq!(out, vec![vec![1, 2], vec![2, 2]]);
        let scores = Tensor::<3>::zeros([2, 4, 3], &device);
        assert!(greedy_decode(scores, &[5, 1], 0).is_err());
    }
}
