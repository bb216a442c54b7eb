//! Phone durations in codec frames from a forced alignment's end times.

/// Largest difference, in frames, between the alignment's end and the code count that
/// [`alignment_frames`] absorbs into the last phone (3 frames = 60 ms at 50 Hz).
pub const MAX_END_MISMATCH: usize = 3;

/// Frames of each phone: boundary `b_k = round(end_k · frame_rate)` (kept monotone), the last
/// boundary set to `n_frames`, so the durations add up to the utterance's code count exactly.
///
/// # Errors
/// A message when `ends` is empty, not finite, or ends more than [`MAX_END_MISMATCH`] frames
/// away from `n_frames` (the alignment does not belong to this audio).
pub fn alignment_frames(
    ends: &[f64],
    frame_rate: f64,
    n_frames: usize,
) -> Result<Vec<u32>, String> {
    let Some(&last) = ends.last() else {
        return Err("the alignment has no phones".into());
    };
    if ends.iter().any(|e| !e.is_finite() || *e < 0.0)
        || !(frame_rate.is_finite() && frame_rate > 0.0)
    {
        return Err(format!(
            "alignment end times must be finite and non-negative (frame rate {frame_rate})"
        ));
    }
    let end_frames = (last * frame_rate).round() as usize;
    if end_frames.abs_diff(n_frames) > MAX_END_MISMATCH {
        return Err(format!(
            "the alignment ends at {last:.3} s = frame {end_frames}, the codes have {n_frames} \
             frames"
        ));
    }
    let mut prev = 0usize;
    let mut out = Vec::with_capacity(ends.len());
    for (k, &e) in ends.iter().enumerate() {
        let b = if k + 1 == ends.len() {
            n_frames
        } else {
            ((e * frame_rate).round() as usize).clamp(prev, n_frames)
        };
        out.push((b - prev) as u32);
        prev = b;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::alignment_frames;

    #[test]
    fn frames_add_up_to_the_codes() {
        // 0.1 s, 0.25 s, 0.31 s at 50 Hz: boundaries 5, 13 (12.5 rounds to 13), 16 → codes 15.
        let d = alignment_frames(&[0.1, 0.25, 0.31], 50.0, 15).unwrap();
        assert_eq!(d, vec![5, 8, 2]);
        assert_eq!(d.iter().sum::<u32>(), 15);
        // a phone shorter than half a frame gets none; later boundaries stay monotone
        let d = alignment_frames(&[0.1, 0.105, 0.2], 50.0, 10).unwrap();
        assert_eq!(d, vec![5, 0, 5]);
    }

    #[test]
    fn a_foreign_alignment_is_refused() {
        assert!(alignment_frames(&[0.1, 2.0], 50.0, 20).is_err());
        assert!(alignment_frames(&[], 50.0, 20).is_err());
        assert!(alignment_frames(&[f64::NAN], 50.0, 20).is_err());
    }
}
