//! How a resynthesis keeps voiced speech: the mel-cepstral distortion on the frames the
//! reference voices, and the error of its F0 there (a vocoder's or codec's frame-rate buzz and
//! pitch jitter show in these, and are diluted in an MCD over silence and consonants).
//!
//! ```text
//! reference, synthesis  (same rate; frames paired by index, 10 ms hop)
//! voiced(i)      = YIN finds an F0 in reference frame i            (voxspec_audio::pitch_track)
//! mcd_voiced     = mean MCD(i) over frames voiced in the reference (MelCepstralDistortion)
//! f0 error(i)    = 1200 · log2(F0_syn(i) / F0_ref(i)) cents, frames voiced in both
//! f0_rmse_cents  = sqrt(mean error²)
//! gross_f0_error = share of frames voiced in both whose F0 is off by more than 20 %
//! vuv_error      = share of frames whose voicing decisions differ
//! ```

use voxspec_audio::{Audio, PitchConfig, pitch_track};

use crate::error::MetricsError;
use crate::metrics::MelCepstralDistortion;

/// A voiced-frame comparison of one resynthesis with its reference.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct VoicedScore {
    /// Mean MCD (dB) over frames voiced in the reference.
    pub mcd_db: f64,
    /// Frames voiced in the reference (those `mcd_db` averages).
    pub voiced_frames: usize,
    /// RMS F0 error in cents over frames voiced in both.
    pub f0_rmse_cents: f64,
    /// Share of frames voiced in both with an F0 off by more than 20 %.
    pub gross_f0_error: f64,
    /// Frames voiced in both.
    pub both_voiced_frames: usize,
    /// Share of compared frames whose voicing decisions differ.
    pub vuv_error: f64,
    /// Frames compared.
    pub frames: usize,
}

impl VoicedScore {
    /// The scores of several utterances pooled over their frames (each mean weighted by the
    /// frames it averages; the F0 RMSE pooled over squared errors).
    pub fn pool(scores: &[VoicedScore]) -> VoicedScore {
        let mut out = VoicedScore::default();
        let (mut mcd, mut sq, mut gross, mut vuv) = (0.0, 0.0, 0.0, 0.0);
        for s in scores {
            out.voiced_frames += s.voiced_frames;
            out.both_voiced_frames += s.both_voiced_frames;
            out.frames += s.frames;
            mcd += s.mcd_db * s.voiced_frames as f64;
            sq += s.f0_rmse_cents * s.f0_rmse_cents * s.both_voiced_frames as f64;
            gross += s.gross_f0_error * s.both_voiced_frames as f64;
            vuv += s.vuv_error * s.frames as f64;
        }
        out.mcd_db = mcd / out.voiced_frames.max(1) as f64;
        out.f0_rmse_cents = (sq / out.both_voiced_frames.max(1) as f64).sqrt();
        out.gross_f0_error = gross / out.both_voiced_frames.max(1) as f64;
        out.vuv_error = vuv / out.frames.max(1) as f64;
        out
    }
}

/// Voiced-frame MCD and F0 error at one sample rate.
#[derive(Debug, Clone)]
pub struct VoicedMetrics {
    mcd: MelCepstralDistortion,
    pitch: PitchConfig,
}

impl VoicedMetrics {
    /// The metric with `mcd` (whose rate both waveforms must have) and YIN settings `pitch`,
    /// whose hop must equal the MCD's so that frames pair by index.
    ///
    /// # Errors
    /// [`MetricsError::InvalidConfig`] for a bad pitch config or differing hops.
    pub fn new(mcd: MelCepstralDistortion, pitch: PitchConfig) -> Result<Self, MetricsError> {
        pitch
            .validate(mcd.sample_rate())
            .map_err(|e| MetricsError::InvalidConfig {
                field: "pitch",
                reason: e.to_string(),
            })?;
        let mcd_hop = mcd.config().hop_ms / 1000.0;
        if (f64::from(pitch.hop) - mcd_hop).abs() > 1e-6 {
            return Err(MetricsError::InvalidConfig {
                field: "pitch.hop",
                reason: format!(
                    "{} s, but the MCD's hop is {mcd_hop} s: frames must pair by index",
                    pitch.hop
                ),
            });
        }
        Ok(Self { mcd, pitch })
    }

    /// Compares `synthesis` with `reference` (see the module documentation).
    ///
    /// # Errors
    /// [`MetricsError::RateMismatch`] or [`MetricsError::Empty`] as
    /// [`MelCepstralDistortion::distortion`].
    pub fn score(&self, reference: &Audio, synthesis: &Audio) -> Result<VoicedScore, MetricsError> {
        let rate = self.mcd.sample_rate();
        for (which, audio) in [("reference", reference), ("synthesis", synthesis)] {
            if audio.sample_rate != rate {
                return Err(MetricsError::RateMismatch {
                    which,
                    expected: rate,
                    found: audio.sample_rate,
                });
            }
            if audio.samples.is_empty() {
                return Err(MetricsError::Empty { which });
            }
        }
        let mcd = self
            .mcd
            .frame_distortions(&reference.samples, &synthesis.samples)?;
        let track = |samples: &[f32]| {
            pitch_track(samples, rate, &self.pitch).map_err(|e| MetricsError::InvalidConfig {
                field: "pitch",
                reason: e.to_string(),
            })
        };
        let f0_ref = track(&reference.samples)?;
        let f0_syn = track(&synthesis.samples)?;
        let frames = mcd.len().min(f0_ref.len()).min(f0_syn.len());
        let mut out = VoicedScore {
            frames,
            ..VoicedScore::default()
        };
        let (mut mcd_sum, mut sq_cents, mut gross, mut vuv) = (0.0, 0.0, 0usize, 0usize);
        for i in 0..frames {
            if f0_ref[i].is_some() != f0_syn[i].is_some() {
                vuv += 1;
            }
            let Some(r) = f0_ref[i] else { continue };
            out.voiced_frames += 1;
            mcd_sum += mcd[i];
            if let Some(s) = f0_syn[i] {
                out.both_voiced_frames += 1;
                let cents = 1200.0 * f64::from(s / r).log2();
                sq_cents += cents * cents;
                gross += usize::from((f64::from(s) / f64::from(r) - 1.0).abs() > 0.2);
            }
        }
        let share = |n: usize, d: usize| if d == 0 { 0.0 } else { n as f64 / d as f64 };
        out.mcd_db = mcd_sum / out.voiced_frames.max(1) as f64;
        out.f0_rmse_cents = (sq_cents / out.both_voiced_frames.max(1) as f64).sqrt();
        out.gross_f0_error = share(gross, out.both_voiced_frames);
        out.vuv_error = share(vuv, frames);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::McdConfig;

    fn tone(f0: f32, seconds: f32, rate: u32) -> Audio {
        let n = (seconds * rate as f32) as usize;
        let samples = (0..n)
            .map(|i| {
                let t = i as f32 / rate as f32;
                (1..=5)
                    .map(|h| (2.0 * std::f32::consts::PI * f0 * h as f32 * t).sin() / h as f32)
                    .sum::<f32>()
                    * 0.2
            })
            .collect();
        Audio::new(samples, rate)
    }

    fn metrics() -> VoicedMetrics {
        let mcd = McdConfig::new().init(16_000).expect("mcd");
        VoicedMetrics::new(mcd, PitchConfig::default()).expect("voiced metrics")
    }

    #[test]
    fn identical_signals_score_zero() {
        let a = tone(180.0, 0.5, 16_000);
        let s = metrics().score(&a, &a).expect("score");
        assert!(s.voiced_frames > 30, "{s:?}");
        assert!(s.mcd_db.abs() < 1e-9 && s.f0_rmse_cents < 1e-6, "{s:?}");
        assert_eq!(s.vuv_error, 0.0);
    }

    #[test]
    fn a_semitone_up_is_a_hundred_cents() {
        let a = tone(180.0, 0.5, 16_000);
        let b = tone(180.0 * 2f32.powf(1.0 / 12.0), 0.5, 16_000);
        let s = metrics().score(&a, &b).expect("score");
        assert!((s.f0_rmse_cents - 100.0).abs() < 15.0, "{s:?}");
        assert_eq!(s.gross_f0_error, 0.0, "{s:?}");
        assert!(s.mcd_db > 0.0);
    }

    #[test]
    fn noise_loses_the_voicing() {
        let a = tone(150.0, 0.5, 16_000);
        let mut x = 12345u32;
        let noise = a
            .samples
            .iter()
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x as f32 / u32::MAX as f32 - 0.5) * 0.4
            })
            .collect();
        let s = metrics()
            .score(&a, &Audio::new(noise, 16_000))
            .expect("score");
        assert!(s.vuv_error > 0.8, "{s:?}");
    }

    #[test]
    fn pooling_weights_by_frames() {
        let a = VoicedScore {
            mcd_db: 2.0,
            voiced_frames: 10,
            f0_rmse_cents: 30.0,
            gross_f0_error: 0.0,
            both_voiced_frames: 10,
            vuv_error: 0.0,
            frames: 20,
        };
        let b = VoicedScore {
            mcd_db: 5.0,
            voiced_frames: 30,
            f0_rmse_cents: 0.0,
            gross_f0_error: 1.0,
            both_voiced_frames: 30,
            vuv_error: 0.5,
            frames: 20,
        };
        let p = VoicedScore::pool(&[a, b]);
        assert!((p.mcd_db - 4.25).abs() < 1e-12);
        assert!((p.f0_rmse_cents - (900.0f64 * 10.0 / 40.0).sqrt()).abs() < 1e-9);
        assert!((p.gross_f0_error - 0.75).abs() < 1e-12);
        assert!((p.vuv_error - 0.25).abs() < 1e-12);
    }

    #[test]
    fn differing_hops_are_refused() {
        let mcd = McdConfig::new().init(16_000).expect("mcd");
        let pitch = PitchConfig {
            hop: 0.005,
            ..PitchConfig::default()
        };
        assert!(VoicedMetrics::new(mcd, pitch).is_err());
    }
}
