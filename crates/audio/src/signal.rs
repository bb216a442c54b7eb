//! Small deterministic test signals.

use std::f64::consts::PI;

/// `n` samples of `amp * sin(2π f t)` at `sample_rate`, computed in `f64` and rounded to `f32`.
pub fn sine(freq_hz: f32, sample_rate: u32, n: usize, amp: f32) -> Vec<f32> {
    let w = 2.0 * PI * f64::from(freq_hz) / f64::from(sample_rate.max(1));
    (0..n)
        .map(|i| (f64::from(amp) * (w * i as f64).sin()) as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sine_has_expected_values() {
        let s = sine(4000.0, 16000, 5, 0.5);
        let want = [0.0f32, 0.5, 0.0, -0.5, 0.0];
        for (a, b) in s.iter().zip(want) {
            assert!((a - b).abs() < 1e-7, "{s:?}");
        }
    }
}
