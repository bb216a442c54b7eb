//! The step track of an aligned multi-stream LM: the phones each coming frame speaks.
//!
//! A small codec LM trained on minutes of speech does not learn to align text and speech by
//! attention alone (the main job's AR model scores chance without it; see
//! `recipes/libritts/MODEL_CARD.md`). As the aligned single-stream model does with its phone
//! track, an aligned [`crate::MultiStreamModel`] is told at every speech step which phones the
//! frames it is about to produce speak, from per-phone durations (forced alignments in
//! training, its own [`voxspec_mtp::DurationPredictor`] at inference).
//!
//! Frames of a multi-stream codec are long (120 ms holds one to three phones), so durations are
//! kept in finer *units* (`units_per_frame` per frame: 6 units of 20 ms at 120 ms) and a frame
//! lists every phone that overlaps it:
//!
//! ```text
//! phones p_0 … p_{L-1}, durations u_0 … u_{L-1} units, b_k = u_0 + … + u_k, T = ⌈b_{L-1} / r⌉
//! frame f covers units [f·r, (f+1)·r); it speaks phone k when b_{k-1} < (f+1)·r and b_k > f·r
//!   (a zero-length phone when f·r ≤ b_k < (f+1)·r)
//! step s (stream 0 predicts frame s there): for w in 0..B+W, i in 0..m, with (p, o) the i-th
//! phone of frame s − B + w and the units of the frame it covers (p = V, o = 0 when none, f < 0
//! or f ≥ T):
//!     slot q = w·m + i,   id = (q·(V+1) + p)·(r+1) + o
//! voice and text positions: NONE = W·m·(V+1)·(r+1) in every slot
//! ```
//!
//! Stream `j > 0` predicts frame `s − d·j` at step `s`: with `B = d·(K − 1)` frames behind
//! (what `voxspec train multistream` sets) every stream sees its own frame's phones at the step
//! that predicts it; with `B = 0` they were given `d·j` steps earlier, in the causal context. The ids are a function of the step index alone, so a
//! cache truncated to any length needs no other rollback.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{Device, Int, Tensor};
use serde::{Deserialize, Serialize};

/// Settings of the step track and the duration predictor of an aligned multi-stream LM.
#[derive(Config, Debug, PartialEq)]
pub struct MsAlignConfig {
    /// Duration units per codec frame `r` (frame_ms / 20 for 20 ms units).
    #[config(default = 6)]
    pub units_per_frame: usize,
    /// Phones listed per frame `m` (more are dropped; 120 ms frames rarely hold more than 3).
    #[config(default = 4)]
    pub phones_per_frame: usize,
    /// Frames shown at each step from the one stream 0 predicts on (`W`: that frame and the
    /// next `W − 1`).
    #[config(default = 2)]
    pub frames_ahead: usize,
    /// Frames shown before the one stream 0 predicts (`B`): with delays, stream `j` predicts
    /// frame `s − d·j` at step `s`, so `B = d·(K − 1)` shows every stream its own frame.
    #[config(default = 0)]
    pub frames_behind: usize,
    /// Layers of the duration predictor's bidirectional encoder.
    #[config(default = 2)]
    pub duration_layers: usize,
    /// Weight of the duration loss (MSE of ln(1 + units)).
    #[config(default = 1.0)]
    pub duration_weight: f32,
}

impl MsAlignConfig {
    /// Ids per position: `(B + W) · m`.
    pub fn slots(&self) -> usize {
        (self.frames_behind + self.frames_ahead) * self.phones_per_frame
    }

    /// Rows of the track embedding over a text vocabulary of `vocab`.
    pub fn rows(&self, vocab: usize) -> usize {
        self.none_id(vocab) as usize + 1
    }

    /// The id of a position that is not a speech step.
    pub fn none_id(&self, vocab: usize) -> u32 {
        (self.slots() * (vocab + 1) * (self.units_per_frame + 1)) as u32
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// A message naming the field that is 0.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("units_per_frame", self.units_per_frame),
            ("phones_per_frame", self.phones_per_frame),
            ("frames_ahead", self.frames_ahead),
        ] {
            if value == 0 {
                return Err(format!("align.{name} must be at least 1"));
            }
        }
        if !(self.duration_weight.is_finite() && self.duration_weight >= 0.0) {
            return Err(format!(
                "align.duration_weight must be finite and >= 0, got {}",
                self.duration_weight
            ));
        }
        Ok(())
    }
}

/// The phones of every frame of one utterance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepTrack {
    /// Per frame, the phones that overlap it, in order (at most `m`), with the units of the
    /// frame each covers.
    frames: Vec<Vec<(u32, u32)>>,
    /// Phones that did not fit in their frame's `m` slots.
    dropped: usize,
}

impl StepTrack {
    /// The track of `phones` lasting `units` units each (equal lengths, checked by the caller)
    /// at `config`'s units per frame and phones per frame.
    pub fn new(phones: &[u32], units: &[u32], config: &MsAlignConfig) -> Self {
        let r = config.units_per_frame.max(1);
        let total: usize = units.iter().map(|&u| u as usize).sum();
        let n_frames = total.div_ceil(r);
        let mut frames = vec![Vec::new(); n_frames];
        let mut dropped = 0;
        let mut start = 0usize;
        for (&phone, &u) in phones.iter().zip(units) {
            let end = start + u as usize;
            let (first, last) = if end > start {
                (start / r, (end - 1) / r)
            } else {
                // A zero-length phone belongs to the frame its boundary falls in.
                let f = (start / r).min(n_frames.saturating_sub(1));
                (f, f)
            };
            for (f, slot) in frames.iter_mut().enumerate().take(last + 1).skip(first) {
                let covered = end.min((f + 1) * r).saturating_sub(start.max(f * r));
                if slot.len() < config.phones_per_frame {
                    slot.push((phone, covered as u32));
                } else {
                    dropped += 1;
                }
            }
            start = end;
        }
        Self { frames, dropped }
    }

    /// Frames of speech `T`.
    pub fn frames(&self) -> usize {
        self.frames.len()
    }

    /// Phone occurrences that did not fit their frame's slots.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Appends the `W · m` ids of speech step `step` (over a text vocabulary of `vocab`).
    pub fn push_step(&self, step: usize, vocab: usize, config: &MsAlignConfig, out: &mut Vec<u32>) {
        let (m, v1, r1) = (
            config.phones_per_frame,
            vocab + 1,
            config.units_per_frame + 1,
        );
        for w in 0..config.frames_behind + config.frames_ahead {
            // Frame step − B + w; before frame 0 there is nothing (as past the end).
            let phones = (step + w)
                .checked_sub(config.frames_behind)
                .and_then(|f| self.frames.get(f))
                .map_or(&[][..], Vec::as_slice);
            for i in 0..m {
                let q = w * m + i;
                let (phone, units) = phones
                    .get(i)
                    .map_or((vocab, 0), |&(p, o)| (p as usize, (o as usize).min(r1 - 1)));
                out.push(((q * v1 + phone) * r1 + units) as u32);
            }
        }
    }

    /// The ids of steps `from .. from + n`, `[n][W · m]` flattened.
    pub fn steps(&self, from: usize, n: usize, vocab: usize, config: &MsAlignConfig) -> Vec<u32> {
        let mut out = Vec::with_capacity(n * config.slots());
        for s in from..from + n {
            self.push_step(s, vocab, config, &mut out);
        }
        out
    }
}

/// Per-phone durations in track units from an alignment's phone end times (seconds), for an
/// utterance of `frames` codec frames of `units_per_frame` units at `unit_rate` units per
/// second: boundaries rounded to units, the total kept within the last frame (`(frames − 1)·r
/// < total ≤ frames·r`; the codec pads the last frame) by moving the last phone's end.
///
/// # Errors
/// A message when `ends` is empty, not finite, decreasing, or ends more than one frame away
/// from the codes.
pub fn alignment_units(
    ends: &[f64],
    unit_rate: f64,
    frames: usize,
    units_per_frame: usize,
) -> Result<Vec<u32>, String> {
    let Some(&last) = ends.last() else {
        return Err("the alignment has no phones".into());
    };
    if ends.iter().any(|e| !e.is_finite() || *e < 0.0) || ends.windows(2).any(|w| w[1] < w[0]) {
        return Err("alignment end times must be finite, non-negative and increasing".into());
    }
    let r = units_per_frame.max(1);
    let (lo, hi) = ((frames.max(1) - 1) * r + 1, frames * r);
    let want = ((last * unit_rate).round() as usize).clamp(lo, hi);
    if (last * unit_rate).round() as usize > hi + r
        || ((last * unit_rate).round() as usize) + r < lo
    {
        return Err(format!(
            "the alignment ends at {last:.3} s, the codes have {frames} frames of {:.3} s",
            r as f64 / unit_rate
        ));
    }
    let mut prev = 0usize;
    let mut out = Vec::with_capacity(ends.len());
    for (k, &e) in ends.iter().enumerate() {
        let b = if k + 1 == ends.len() {
            want.max(prev)
        } else {
            ((e * unit_rate).round() as usize).clamp(prev, want)
        };
        out.push((b - prev) as u32);
        prev = b;
    }
    Ok(out)
}

/// Learned embeddings of the track ids, summed per position.
#[derive(Module, Debug)]
pub struct StepTrackEmbedding {
    /// `rows × d_model`.
    pub embedding: Embedding,
}

impl StepTrackEmbedding {
    /// A fresh embedding for `config` over a text vocabulary of `vocab`, width `d_model`.
    pub fn init(config: &MsAlignConfig, vocab: usize, d_model: usize, device: &Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(config.rows(vocab), d_model).init(device),
        }
    }

    /// Sum of the embeddings of each position's ids, scaled by 1/√slots.
    ///
    /// # Shapes
    /// - `ids`: `[batch, time, slots]`
    /// - output: `[batch, time, d_model]`
    pub fn forward(&self, ids: Tensor<3, Int>) -> Tensor<3> {
        voxspec_mtp::summed_slots(&self.embedding, ids)
    }
}

#[cfg(test)]
mod tests {
    use super::{MsAlignConfig, StepTrack, alignment_units};

    #[test]
    fn units_from_an_alignment_fit_the_frames() {
        // 50 units/s, 6 units per frame, 3 frames → total in (12, 18].
        let u = alignment_units(&[0.1, 0.15, 0.33], 50.0, 3, 6).expect("fits");
        assert_eq!(u, vec![5, 3, 9]);
        // Ends short of the padded last frame: total raised into it, never below 13.
        let u = alignment_units(&[0.1, 0.2], 50.0, 3, 6).expect("fits");
        assert_eq!(u.iter().sum::<u32>(), 13);
        assert!(alignment_units(&[0.1, 0.9], 50.0, 3, 6).is_err());
        assert!(alignment_units(&[], 50.0, 3, 6).is_err());
        assert!(alignment_units(&[0.2, 0.1], 50.0, 3, 6).is_err());
    }

    #[test]
    fn frames_list_every_overlapping_phone() {
        // r = 3 units per frame; phones 7 (2 units), 8 (0 units), 9 (4 units), 10 (1 unit)
        // units: 7 7 9 | 9 9 9 | 10 → frame 0 = [7, 8, 9] (8 at the boundary, unit 2),
        // frame 1 = [9], frame 2 = [10]
        let c = MsAlignConfig::new()
            .with_units_per_frame(3)
            .with_phones_per_frame(3)
            .with_frames_ahead(2);
        let t = StepTrack::new(&[7, 8, 9, 10], &[2, 0, 4, 1], &c);
        assert_eq!(t.frames(), 3);
        assert_eq!(
            t.frames,
            vec![vec![(7, 2), (8, 0), (9, 1)], vec![(9, 3)], vec![(10, 1)]]
        );
        assert_eq!(t.dropped(), 0);
        // vocabulary 11 (none = 11), r + 1 = 4: id = (q·12 + phone)·4 + units
        let v = 11;
        let id = |q: u32, p: u32, o: u32| (q * 12 + p) * 4 + o;
        let ids = t.steps(1, 3, v, &c);
        // step 1: frame 1 = [9 (3 units), -, -], frame 2 = [10 (1 unit), -, -]
        let want = [
            id(0, 9, 3),
            id(1, 11, 0),
            id(2, 11, 0),
            id(3, 10, 1),
            id(4, 11, 0),
            id(5, 11, 0),
        ];
        assert_eq!(&ids[..6], &want);
        // step 2: frame 2 then END
        assert_eq!(&ids[6..9], &[id(0, 10, 1), id(1, 11, 0), id(2, 11, 0)]);
        assert_eq!(&ids[9..12], &[id(3, 11, 0), id(4, 11, 0), id(5, 11, 0)]);
        // step 3 is past T: all END
        assert!(
            ids[12..]
                .iter()
                .enumerate()
                .all(|(q, &x)| x == id(q as u32, 11, 0))
        );
        assert_eq!(c.none_id(v), 6 * 12 * 4);
        assert_eq!(c.rows(v), 6 * 12 * 4 + 1);
    }

    #[test]
    fn frames_behind_show_the_delayed_streams_their_frames() {
        let c = MsAlignConfig::new()
            .with_units_per_frame(2)
            .with_phones_per_frame(1)
            .with_frames_ahead(1)
            .with_frames_behind(2);
        // frames: 0 = [5], 1 = [6], 2 = [7]
        let t = StepTrack::new(&[5, 6, 7], &[2, 2, 2], &c);
        let v = 9; // id = (q·10 + p)·3 + o
        let id = |q: u32, p: u32, o: u32| (q * 10 + p) * 3 + o;
        // step 0: frames −2, −1 (none), 0
        assert_eq!(
            t.steps(0, 1, v, &c),
            vec![id(0, 9, 0), id(1, 9, 0), id(2, 5, 2)]
        );
        // step 2: frames 0, 1, 2
        assert_eq!(
            t.steps(2, 1, v, &c),
            vec![id(0, 5, 2), id(1, 6, 2), id(2, 7, 2)]
        );
        assert_eq!(c.slots(), 3);
    }

    #[test]
    fn phones_beyond_the_slots_are_counted() {
        let c = MsAlignConfig::new()
            .with_units_per_frame(6)
            .with_phones_per_frame(2);
        let t = StepTrack::new(&[1, 2, 3, 4], &[1, 1, 1, 3], &c);
        assert_eq!(t.frames(), 1);
        assert_eq!(t.dropped(), 2);
    }
}
