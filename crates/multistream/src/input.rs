//! The inputs of a multi-stream LM: host rows of (voice vector, text tokens, delayed speech
//! steps) laid out in one sequence per row, uploaded as the tensors the model embeds.
//!
//! ```text
//! position:  0        | 1 … L      | L+1 … L+n          (without a voice vector: no position 0)
//! segment:   voice    | text       | speech             (VOICE = 0, TEXT = 1, SPEECH = 2)
//! content:   W_g · g  | text_i     | Σ_j E_j[step_s[j]]  (step_s: the delayed codes of step s)
//! ```
//!
//! A row may hold any of the three parts, always in that order: a whole training sequence, a
//! prompt to prefill (voice, text, step 0), or a block of `k` new speech steps for the cached
//! forward. Rows of one batch are right-padded; padding positions are masked.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::error::{MultiStreamError, Result};
use crate::model::MultiStreamConfig;

/// Segment id of the voice (global vector) position.
pub const VOICE: u32 = 0;
/// Segment id of text positions.
pub const TEXT: u32 = 1;
/// Segment id of speech positions (padding too; it is masked).
pub const SPEECH: u32 = 2;

/// One row of input, host side.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeqRow<'a> {
    /// The global (voice) vector, `global_dim` values, or `None` (no voice position).
    pub voice: Option<&'a [f32]>,
    /// Text token ids.
    pub text: &'a [u32],
    /// Delayed speech steps `[streams][n]`: codes `< codebook_size` or the special token
    /// `codebook_size`. Empty (no speech) or `streams` rows of one length.
    pub steps: &'a [Vec<u32>],
    /// Step-track ids of the speech steps, `[n][slots]` flattened (aligned models; empty
    /// otherwise): see [`crate::align::StepTrack::steps`].
    pub track: &'a [u32],
}

impl SeqRow<'_> {
    /// Speech steps in the row.
    pub fn n_steps(&self) -> usize {
        self.steps.first().map_or(0, Vec::len)
    }

    /// Positions the row occupies.
    pub fn len(&self) -> usize {
        usize::from(self.voice.is_some()) + self.text.len() + self.n_steps()
    }

    /// Whether the row holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A batch of rows as tensors, right-padded to `time`.
#[derive(Debug, Clone)]
pub struct MsInput {
    /// Text ids `[batch, time]` (0 outside text positions).
    pub text: Tensor<2, Int>,
    /// 1 at text positions `[batch, time, 1]`.
    pub text_mask: Tensor<3>,
    /// Delayed speech ids `[batch, streams, time]` (the special token outside speech).
    pub speech: Tensor<3, Int>,
    /// 1 at speech positions `[batch, time, 1]`.
    pub speech_mask: Tensor<3>,
    /// Segment ids `[batch, time]` ([`VOICE`], [`TEXT`], [`SPEECH`]).
    pub segment: Tensor<2, Int>,
    /// Voice vectors `[batch, global_dim]` (zeros for rows without one) and 1 at the voice
    /// position `[batch, time, 1]`; `None` when no row has a voice vector.
    pub voice: Option<(Tensor<2>, Tensor<3>)>,
    /// Step-track ids `[batch, time, slots]` of an aligned model (NONE outside speech).
    pub track: Option<Tensor<3, Int>>,
    /// True at real positions `[batch, time]`.
    pub mask: Tensor<2, Bool>,
    /// Real length of each row.
    pub lens: Vec<usize>,
}

impl MsInput {
    /// Checks `rows` against `config` and uploads them to `device`.
    ///
    /// # Errors
    /// [`MultiStreamError::InvalidInput`] for no rows, an empty row, a voice vector of the wrong
    /// size (or any for a model without `global_dim`), speech steps that are not `streams` rows
    /// of one length; [`MultiStreamError::TokenOutOfRange`] for a text token `≥ text_vocab` or a
    /// speech id `> codebook_size`.
    pub fn build(config: &MultiStreamConfig, rows: &[SeqRow<'_>], device: &Device) -> Result<Self> {
        let bad = |detail: String| Err(MultiStreamError::InvalidInput { detail });
        if rows.is_empty() {
            return bad("no rows".into());
        }
        let (k, special, g) = (config.streams, config.special(), config.global_dim);
        for (b, row) in rows.iter().enumerate() {
            if row.is_empty() {
                return bad(format!("row {b} is empty"));
            }
            if let Some(v) = row.voice {
                if g == 0 {
                    return bad(format!(
                        "row {b} has a voice vector; the model has no global_dim"
                    ));
                }
                if v.len() != g {
                    return bad(format!(
                        "row {b}: voice vector of {} values, global_dim {g}",
                        v.len()
                    ));
                }
            }
            if !row.steps.is_empty()
                && (row.steps.len() != k || row.steps.iter().any(|s| s.len() != row.n_steps()))
            {
                return bad(format!(
                    "row {b}: speech steps of lengths {:?}; {k} streams of one length expected",
                    row.steps.iter().map(Vec::len).collect::<Vec<_>>()
                ));
            }
            let slots = config.track_slots();
            if row.track.len() != row.n_steps() * slots {
                return bad(format!(
                    "row {b}: {} step-track ids for {} steps of {slots} slots",
                    row.track.len(),
                    row.n_steps()
                ));
            }
            if let Some(a) = &config.align
                && let Some(&id) = row
                    .track
                    .iter()
                    .find(|&&id| id >= a.none_id(config.text_vocab))
            {
                return Err(MultiStreamError::TokenOutOfRange {
                    what: "step-track",
                    token: id,
                    vocab: a.none_id(config.text_vocab) as usize,
                });
            }
            if let Some(&t) = row.text.iter().find(|&&t| t as usize >= config.text_vocab) {
                return Err(MultiStreamError::TokenOutOfRange {
                    what: "text",
                    token: t,
                    vocab: config.text_vocab,
                });
            }
            if let Some(&c) = row.steps.iter().flatten().find(|&&c| c > special) {
                return Err(MultiStreamError::TokenOutOfRange {
                    what: "code",
                    token: c,
                    vocab: config.codebook_size + 1,
                });
            }
        }
        let batch = rows.len();
        let lens: Vec<usize> = rows.iter().map(SeqRow::len).collect();
        let time = lens.iter().copied().max().unwrap_or(1);
        let mut text = vec![0i64; batch * time];
        let mut text_mask = vec![0f32; batch * time];
        let mut speech = vec![i64::from(special); batch * k * time];
        let mut speech_mask = vec![0f32; batch * time];
        let mut segment = vec![i64::from(SPEECH); batch * time];
        let mut mask = vec![false; batch * time];
        let slots = config.track_slots();
        let mut track = match &config.align {
            Some(a) => vec![i64::from(a.none_id(config.text_vocab)); batch * time * slots],
            None => Vec::new(),
        };
        let any_voice = rows.iter().any(|r| r.voice.is_some());
        let mut voice = vec![0f32; if any_voice { batch * g } else { 0 }];
        let mut voice_mask = vec![0f32; if any_voice { batch * time } else { 0 }];
        for (b, row) in rows.iter().enumerate() {
            let at = |p: usize| b * time + p;
            let mut p = 0;
            if let Some(v) = row.voice {
                voice[b * g..(b + 1) * g].copy_from_slice(v);
                voice_mask[at(0)] = 1.0;
                segment[at(0)] = i64::from(VOICE);
                p = 1;
            }
            for &t in row.text {
                text[at(p)] = i64::from(t);
                text_mask[at(p)] = 1.0;
                segment[at(p)] = i64::from(TEXT);
                p += 1;
            }
            for s in 0..row.n_steps() {
                speech_mask[at(p)] = 1.0;
                for q in 0..slots {
                    // [batch, time, slots]
                    track[at(p) * slots + q] = i64::from(row.track[s * slots + q]);
                }
                for (j, stream) in row.steps.iter().enumerate() {
                    // [batch, streams, time]
                    speech[(b * k + j) * time + p] = i64::from(stream[s]);
                }
                p += 1;
            }
            mask[at(0)..at(p)].fill(true);
        }
        let float3 =
            |v: Vec<f32>| Tensor::<3>::from_data(TensorData::new(v, [batch, time, 1]), device);
        Ok(Self {
            text: Tensor::from_data(TensorData::new(text, [batch, time]), device),
            text_mask: float3(text_mask),
            speech: Tensor::from_data(TensorData::new(speech, [batch, k, time]), device),
            speech_mask: float3(speech_mask),
            segment: Tensor::from_data(TensorData::new(segment, [batch, time]), device),
            voice: any_voice.then(|| {
                (
                    Tensor::from_data(TensorData::new(voice, [batch, g]), device),
                    float3(voice_mask),
                )
            }),
            track: (slots > 0)
                .then(|| Tensor::from_data(TensorData::new(track, [batch, time, slots]), device)),
            mask: Tensor::from_data(TensorData::new(mask, [batch, time]), device),
            lens,
        })
    }

    /// `[batch, time]`.
    pub fn dims(&self) -> [usize; 2] {
        self.text.dims()
    }
}
