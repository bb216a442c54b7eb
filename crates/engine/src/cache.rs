//! The engine's decoding state: a preallocated key/value cache per layer, a length per
//! sequence, each aligned sequence's phone track, and the scratch buffers of a step, so a step
//! allocates nothing once the buffers have grown to the largest block seen.
//!
//! ```text
//! layer l:  k[l]  [batch, heads, head_dim, capacity]   keys transposed: a query's scores are
//!                                                      axpys over contiguous positions
//!           v[l]  [batch, heads, capacity, head_dim]
//!  sequence 0  [k0 k1 k2 k3 k4 k5 · · ]   length 6
//!  sequence 1  [k0 k1 k2|x  x  x  · · ]   length 3 after truncate(1, 3): x is stale, never read
//! ```
//!
//! Rolling back is a change of length, O(1); the phone track is a function of the position,
//! so it needs no rollback.

use voxspec_mtp::FrameTrack;

use crate::error::{EngineError, Result};

/// Buffers of one forward call, grown on demand and reused.
#[derive(Debug, Default, Clone)]
pub(crate) struct Scratch {
    /// `[rows, d]`: the residual stream.
    pub x: Vec<f32>,
    /// `[rows, d]`: normalised input of a sub-layer.
    pub h: Vec<f32>,
    /// `[rows, 3·d]`: queries, keys, values.
    pub qkv: Vec<f32>,
    /// `[rows, d]`: attention context, then sub-layer outputs.
    pub ctx: Vec<f32>,
    /// `[heads, rows, head_dim]`: per-head context of one sequence.
    pub heads_ctx: Vec<f32>,
    /// `[heads, new, keys]`: attention scores of one sequence's block.
    pub scores: Vec<f32>,
    /// `[rows, 2·d_ff]` (SwiGLU's gate and up) or `[rows, d_ff]`.
    pub gate_up: Vec<f32>,
    /// `[rows, d_ff]`: the MLP's activation.
    pub act: Vec<f32>,
    /// `[selected rows, d]`: hidden states the heads read.
    pub sel: Vec<f32>,
    /// `[selected rows, d]`: a Medusa head's residual branch.
    pub res: Vec<f32>,
    /// `[selected rows, vocab]`: one head's logits.
    pub head_out: Vec<f32>,
    /// Track ids of one position.
    pub track_ids: Vec<u32>,
    /// Per row of the call: (sequence, position).
    pub rows: Vec<(usize, usize)>,
    /// Rows the heads read: (row of `h`, sequence, logits position).
    pub selected: Vec<(usize, usize, usize)>,
}

/// Grows `buf` to at least `len` values (never shrinks: no allocation once large enough).
pub(crate) fn ensure(buf: &mut Vec<f32>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
}

/// Decoding state of a batch for [`crate::NativeMtp`].
#[derive(Debug, Clone)]
pub struct NativeCache {
    /// Per layer: `[batch, heads, head_dim, capacity]` (transposed).
    pub(crate) k: Vec<Vec<f32>>,
    /// Per layer: `[batch, heads, capacity, head_dim]`.
    pub(crate) v: Vec<Vec<f32>>,
    pub(crate) lengths: Vec<usize>,
    pub(crate) capacity: usize,
    pub(crate) heads: usize,
    pub(crate) head_dim: usize,
    /// Per sequence (aligned models, after prefill): text tokens before SEP and the track.
    pub(crate) tracks: Vec<Option<(usize, FrameTrack)>>,
    pub(crate) scratch: Scratch,
}

impl NativeCache {
    /// An empty cache of `n_layers` layers for `batch` sequences of `capacity` positions.
    pub(crate) fn new(
        n_layers: usize,
        heads: usize,
        head_dim: usize,
        batch: usize,
        capacity: usize,
    ) -> Self {
        let size = batch * heads * capacity * head_dim;
        Self {
            k: (0..n_layers).map(|_| vec![0.0; size]).collect(),
            v: (0..n_layers).map(|_| vec![0.0; size]).collect(),
            lengths: vec![0; batch],
            capacity,
            heads,
            head_dim,
            tracks: vec![None; batch],
            scratch: Scratch::default(),
        }
    }

    /// Sequences in the batch.
    pub fn batch_size(&self) -> usize {
        self.lengths.len()
    }

    /// Positions each sequence can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Cached positions of every sequence.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// Whether no sequence holds a position.
    pub fn is_empty(&self) -> bool {
        self.lengths.iter().all(|&l| l == 0)
    }

    /// The phone track of sequence `b` (aligned models, after prefill).
    pub fn track(&self, b: usize) -> Option<&FrameTrack> {
        self.tracks.get(b).and_then(|t| t.as_ref().map(|(_, t)| t))
    }

    /// Rolls sequence `b` back to its first `len` positions, O(1).
    ///
    /// # Errors
    /// [`EngineError::CacheMismatch`] for a sequence that does not exist or `len` past its
    /// length.
    pub fn truncate(&mut self, b: usize, len: usize) -> Result<()> {
        match self.lengths.get_mut(b) {
            Some(l) if len <= *l => {
                *l = len;
                Ok(())
            }
            Some(l) => Err(EngineError::CacheMismatch {
                detail: format!("cannot truncate sequence {b} of length {l} to {len}"),
            }),
            None => Err(EngineError::CacheMismatch {
                detail: format!(
                    "sequence {b} does not exist in a batch of {}",
                    self.lengths.len()
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_is_checked() {
        let mut cache = NativeCache::new(2, 2, 4, 2, 8);
        cache.lengths = vec![5, 3];
        cache.truncate(0, 2).expect("shorter");
        assert_eq!(cache.lengths(), &[2, 3]);
        assert!(cache.truncate(1, 4).is_err());
        assert!(cache.truncate(2, 0).is_err());
    }
}
