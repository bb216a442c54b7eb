//! The phone track: what an aligned AR model is told about the speech it is producing.
//!
//! A small decoder-only codec LM trained on minutes of speech does not learn to align text and
//! speech by attention alone (see the model card and REFERENCE "Making a small AR TTS follow the
//! text"). Systems that are *given* the alignment (VALL-E R, RALL-E) work on about an hour. An
//! aligned [`crate::MtpModel`] therefore receives, at the input of every code step, the phones
//! the next frames speak, from per-phone durations (forced alignments in training, the model's
//! [`crate::DurationPredictor`] at inference):
//!
//! ```text
//! text (phones):   p_0 p_1 … p_{L-1}, durations d_0 … d_{L-1} frames, T = Σ d_k
//! frame f:         speaks phone k(f) with b_{k-1} ≤ f < b_k (b = cumulative ends); f ≥ T: END
//! input position:  SEP = frame 0, code c_m = frame m + 1 (the frame head 0 predicts there)
//! track ids at frame j (lookahead λ, progress buckets P):
//!     for i in 0..λ:   i·(V+1) + phone(j + i)          (V = text vocabulary, END = V)
//!     progress:        λ·(V+1) + min(j − b_{k(j)-1}, P − 1)
//! text positions:      λ·(V+1) + P                    (NONE) in all λ + 1 slots
//! ```
//!
//! Head `i` at frame `j` predicts the code of frame `j + i`, so with `λ ≥ n_heads` every head
//! sees the phone of the frame it predicts, and the MTP heads and every decoder run unchanged.
//! The ids are a function of the frame index alone, so a cache truncated to any length needs
//! no other rollback.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{Device, Int, Tensor};

/// Settings of the phone track and the duration predictor of an aligned AR model.
#[derive(Config, Debug, PartialEq)]
pub struct AlignConfig {
    /// Frames ahead whose phone each code step sees (λ; at least the number of heads).
    #[config(default = 8)]
    pub lookahead: usize,
    /// Buckets of "frames since the current phone began" (the last holds all longer).
    #[config(default = 16)]
    pub progress: usize,
    /// Layers of the duration predictor's bidirectional encoder.
    #[config(default = 2)]
    pub duration_layers: usize,
    /// Weight of the duration loss (MSE of log(1 + frames)) in the training objective.
    #[config(default = 1.0)]
    pub duration_weight: f32,
}

/// Index arithmetic of the track ids for a text vocabulary of `vocab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackLayout {
    /// Text vocabulary size V (END is V).
    pub vocab: usize,
    /// λ.
    pub lookahead: usize,
    /// P.
    pub progress: usize,
}

impl TrackLayout {
    /// The layout of `config` over a text vocabulary of `vocab`.
    pub fn new(vocab: usize, config: &AlignConfig) -> Self {
        Self {
            vocab,
            lookahead: config.lookahead,
            progress: config.progress,
        }
    }

    /// Ids per position: λ phones and the progress bucket.
    pub fn slots(&self) -> usize {
        self.lookahead + 1
    }

    /// Rows of the track embedding table.
    pub fn rows(&self) -> usize {
        self.lookahead * (self.vocab + 1) + self.progress + 1
    }

    /// The id of a position that is not a frame (text tokens).
    pub fn none_id(&self) -> u32 {
        (self.lookahead * (self.vocab + 1) + self.progress) as u32
    }
}

/// The alignment of one utterance: its phones and where each ends, in frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameTrack {
    phones: Vec<u32>,
    /// Cumulative end frame of each phone (`ends[k] = d_0 + … + d_k`).
    ends: Vec<usize>,
}

impl FrameTrack {
    /// The track of `phones` lasting `durations` frames each (equal lengths; checked by the
    /// caller).
    pub fn new(phones: &[u32], durations: &[u32]) -> Self {
        let mut ends = Vec::with_capacity(durations.len());
        let mut total = 0usize;
        for &d in durations {
            total += d as usize;
            ends.push(total);
        }
        Self {
            phones: phones.to_vec(),
            ends,
        }
    }

    /// The track of `text` lasting `durations` frames each, checked against `frames` codes:
    /// `Err` names what is missing or does not add up (the caller names the item).
    pub fn checked(text: &[u32], durations: Option<&[u32]>, frames: usize) -> Result<Self, String> {
        let Some(durations) = durations else {
            return Err("has no durations".into());
        };
        if durations.len() != text.len() {
            return Err(format!(
                "has {} durations for {} text tokens",
                durations.len(),
                text.len()
            ));
        }
        let total: usize = durations.iter().map(|&d| d as usize).sum();
        if total != frames {
            return Err(format!(
                "has durations adding up to {total} frames, the codes have {frames}"
            ));
        }
        Ok(Self::new(text, durations))
    }

    /// Frames of speech T (the frame after the last is END).
    pub fn frames(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Index of the phone spoken at `frame`, `None` from frame T on.
    fn phone_index(&self, frame: usize) -> Option<usize> {
        if frame >= self.frames() {
            return None;
        }
        // First phone whose end lies beyond `frame` (zero-length phones are skipped).
        Some(self.ends.partition_point(|&e| e <= frame))
    }

    /// Appends the λ + 1 track ids of `frame` to `out`.
    pub fn push_ids(&self, frame: usize, layout: &TrackLayout, out: &mut Vec<u32>) {
        let v1 = layout.vocab + 1;
        for i in 0..layout.lookahead {
            let phone = match self.phone_index(frame + i) {
                Some(k) => self.phones[k] as usize,
                None => layout.vocab,
            };
            out.push((i * v1 + phone) as u32);
        }
        let start = match self.phone_index(frame) {
            Some(0) => 0,
            Some(k) => self.ends[k - 1],
            None => self.frames(),
        };
        let progress = (frame - start).min(layout.progress - 1);
        out.push((layout.lookahead * v1 + progress) as u32);
    }

    /// The λ + 1 track ids of each of frames `from..from + count`, row-major.
    pub fn ids(&self, layout: &TrackLayout, from: usize, count: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(count * layout.slots());
        for f in from..from + count {
            self.push_ids(f, layout, &mut out);
        }
        out
    }

    /// Appends the ids of `count` text positions (all NONE).
    pub fn push_none(count: usize, layout: &TrackLayout, out: &mut Vec<u32>) {
        out.extend(std::iter::repeat_n(
            layout.none_id(),
            count * layout.slots(),
        ));
    }
}

/// Learned embeddings of the track ids, summed per position.
#[derive(Module, Debug)]
pub struct PhoneTrack {
    /// `rows × d_model`.
    pub embedding: Embedding,
    vocab: usize,
    lookahead: usize,
    progress: usize,
}

impl PhoneTrack {
    /// A fresh track embedding for `layout` and width `d_model`.
    pub fn init(layout: &TrackLayout, d_model: usize, device: &Device) -> Self {
        Self {
            embedding: EmbeddingConfig::new(layout.rows(), d_model).init(device),
            vocab: layout.vocab,
            lookahead: layout.lookahead,
            progress: layout.progress,
        }
    }

    /// The layout the ids follow.
    pub fn layout(&self) -> TrackLayout {
        TrackLayout {
            vocab: self.vocab,
            lookahead: self.lookahead,
            progress: self.progress,
        }
    }

    /// Ids per position.
    pub fn slots(&self) -> usize {
        self.lookahead + 1
    }

    /// Sum of the embeddings of each position's ids, scaled by 1/√slots so the track and the
    /// code embedding start at the same scale.
    ///
    /// # Shapes
    /// - `ids`: `[batch, time, slots]`
    /// - output: `[batch, time, d_model]`
    pub fn forward(&self, ids: Tensor<3, Int>) -> Tensor<3> {
        summed_slots(&self.embedding, ids)
    }
}

/// The embeddings of every position's slot ids summed and scaled by 1/√slots, so a track and
/// the code embedding start at the same scale (the phone track here, the multi-stream LM's
/// step track).
///
/// # Shapes
/// - `ids`: `[batch, time, slots]`
/// - output: `[batch, time, d_model]`
pub fn summed_slots(embedding: &Embedding, ids: Tensor<3, Int>) -> Tensor<3> {
    let [batch, time, slots] = ids.dims();
    let x = embedding.forward(ids.reshape([batch, time * slots]));
    let d = x.dims()[2];
    x.reshape([batch, time, slots, d])
        .sum_dim(2)
        .reshape([batch, time, d])
        .mul_scalar(1.0 / (slots as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> TrackLayout {
        TrackLayout {
            vocab: 10,
            lookahead: 3,
            progress: 2,
        }
    }

    #[test]
    fn ids_follow_the_durations_and_end() {
        // phones 4 (2 frames), 5 (0 frames), 6 (1 frame): T = 3.
        let track = FrameTrack::new(&[4, 5, 6], &[2, 0, 1]);
        assert_eq!(track.frames(), 3);
        let l = layout();
        let mut ids = Vec::new();
        for f in 0..5 {
            track.push_ids(f, &l, &mut ids);
        }
        let v1 = 11;
        let prog = 3 * v1;
        #[rustfmt::skip]
        let expected = vec![
            4, v1 + 4, 2 * v1 + 6, prog,          // frame 0: 4 4 6, first frame of phone 4
            4, v1 + 6, 2 * v1 + 10, prog + 1,     // frame 1: 4 6 END, second frame
            6, v1 + 10, 2 * v1 + 10, prog,        // frame 2: 6 (phone 5 has no frame)
            10, v1 + 10, 2 * v1 + 10, prog,       // frame 3 = T: END
            10, v1 + 10, 2 * v1 + 10, prog + 1,   // past the end, progress capped at P - 1
        ];
        assert_eq!(ids, expected.iter().map(|&x| x as u32).collect::<Vec<_>>());
        assert!(
            ids.iter()
                .all(|&i| (i as usize) < l.rows() && i != l.none_id())
        );
    }
}
