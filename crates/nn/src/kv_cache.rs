//! Key/value cache for incremental decoding, kept outside the model (as in llama-burn and moshi):
//! one preallocated K and V tensor `[batch, heads, capacity, head_dim]` per layer and a length per
//! sequence.
//!
//! Positions `0..lengths[b]` of sequence `b` are valid; whatever lies beyond is stale and never
//! attended to, so rolling back after a rejected speculation is a change of lengths, O(1):
//!
//! ```text
//!  sequence 0  [k0 k1 k2 k3 k4 k5 · · ]   length 6
//!  sequence 1  [k0 k1 k2|x  x  x  · · ]   length 3 after truncate_seq(1, 3): x is stale
//!                                 ^ capacity
//! ```
//!
//! A block of new positions is written with one `slice_assign` per layer when all sequences have
//! the same length (the common case), one per sequence otherwise. The tensors are updated in
//! place when the cache holds the only reference to them; cloning a cache shares storage until
//! the next write, which then copies.

use burn::tensor::{Device, Tensor};

use crate::error::{NnError, Result};
use crate::positions::Span;
use crate::transformer::TransformerConfig;

/// The cached keys and values of one layer.
#[derive(Debug, Clone)]
pub(crate) struct LayerKv {
    /// `[batch, heads, capacity, head_dim]`.
    k: Tensor<4>,
    /// `[batch, heads, capacity, head_dim]`.
    v: Tensor<4>,
}

impl LayerKv {
    /// Writes the keys and values of a block at the positions of `span`.
    ///
    /// # Shapes
    /// - `k`, `v`: `[batch, heads, len, head_dim]`, `len` the span's
    pub(crate) fn write(&mut self, k: Tensor<4>, v: Tensor<4>, span: &Span) {
        let [batch, heads, len, head_dim] = k.dims();
        match span {
            Span::Uniform { start, .. } => {
                let at = [0..batch, 0..heads, *start..start + len, 0..head_dim];
                self.k.inplace(|c| c.slice_assign(at.clone(), k));
                self.v.inplace(|c| c.slice_assign(at, v));
            }
            Span::PerSequence { starts, limit, .. } => {
                for (b, &start) in starts.iter().enumerate() {
                    // Padding past the capacity of a ragged block is not stored.
                    let len = len.min(limit.saturating_sub(start));
                    if len == 0 {
                        continue;
                    }
                    let at = [b..b + 1, 0..heads, start..start + len, 0..head_dim];
                    let kb = k.clone().narrow(0, b, 1).narrow(2, 0, len);
                    let vb = v.clone().narrow(0, b, 1).narrow(2, 0, len);
                    self.k.inplace(|c| c.slice_assign(at.clone(), kb));
                    self.v.inplace(|c| c.slice_assign(at, vb));
                }
            }
        }
    }

    /// Views of the first `len` positions of every sequence (no copy).
    ///
    /// # Shapes
    /// - output: two `[batch, heads, len, head_dim]`
    pub(crate) fn prefix(&self, len: usize) -> (Tensor<4>, Tensor<4>) {
        (
            self.k.clone().narrow(2, 0, len),
            self.v.clone().narrow(2, 0, len),
        )
    }
}

/// Preallocated key/value cache of a [`Transformer`](crate::Transformer), one per batch of
/// sequences being decoded. Not a `Module`: it is inference state and is never saved.
///
/// Build it with [`Transformer::new_cache`](crate::Transformer::new_cache) or [`KvCache::new`],
/// feed it to [`Transformer::forward_cached`](crate::Transformer::forward_cached), and roll back
/// with [`truncate`](Self::truncate) / [`truncate_seq`](Self::truncate_seq).
#[derive(Debug, Clone)]
pub struct KvCache {
    layers: Vec<LayerKv>,
    lengths: Vec<usize>,
    capacity: usize,
    n_heads: usize,
    head_dim: usize,
}

impl KvCache {
    /// An empty cache for a model built from `config`: `batch` sequences of `capacity`
    /// positions each, allocated once on `device`.
    ///
    /// # Errors
    /// [`NnError::InvalidConfig`] for an invalid config; [`NnError::CapacityTooLarge`] when
    /// `capacity` exceeds `config.max_seq_len` (the position tables end there).
    pub fn new(
        config: &TransformerConfig,
        batch: usize,
        capacity: usize,
        device: &Device,
    ) -> Result<Self> {
        config.validate()?;
        if capacity > config.max_seq_len {
            return Err(NnError::CapacityTooLarge {
                capacity,
                max_seq_len: config.max_seq_len,
            });
        }
        Ok(Self::with_layout(
            config.n_layers,
            config.n_heads,
            config.head_dim(),
            batch,
            capacity,
            device,
        ))
    }

    /// An empty cache of the given layout (checked by the caller).
    pub(crate) fn with_layout(
        n_layers: usize,
        n_heads: usize,
        head_dim: usize,
        batch: usize,
        capacity: usize,
        device: &Device,
    ) -> Self {
        // [batch, heads, capacity, head_dim]
        let shape = [batch, n_heads, capacity, head_dim];
        let layers = (0..n_layers)
            .map(|_| LayerKv {
                k: Tensor::zeros(shape, device),
                v: Tensor::zeros(shape, device),
            })
            .collect();
        Self {
            layers,
            lengths: vec![0; batch],
            capacity,
            n_heads,
            head_dim,
        }
    }

    /// Positions each sequence can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of sequences.
    pub fn batch_size(&self) -> usize {
        self.lengths.len()
    }

    /// Number of layers.
    pub fn n_layers(&self) -> usize {
        self.layers.len()
    }

    /// Heads per layer.
    pub fn n_heads(&self) -> usize {
        self.n_heads
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// The longest cached length over the batch; every sequence's length when they are equal
    /// (batch-1 decoding, or no per-sequence rollback). See [`lengths`](Self::lengths).
    pub fn len(&self) -> usize {
        self.lengths.iter().copied().max().unwrap_or(0)
    }

    /// Whether no sequence holds any position.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Cached length of each sequence.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// Free positions left in the fullest sequence.
    pub fn remaining(&self) -> usize {
        self.capacity - self.len()
    }

    /// Shortens every sequence longer than `len` to `len`, in O(1) per sequence; like
    /// [`Vec::truncate`], a sequence already shorter is left as it is.
    pub fn truncate(&mut self, len: usize) {
        for length in &mut self.lengths {
            *length = (*length).min(len);
        }
    }

    /// Shortens sequence `index` to `len` if it is longer, in O(1).
    pub fn truncate_seq(&mut self, index: usize, len: usize) -> Result<()> {
        let batch = self.lengths.len();
        let length = self
            .lengths
            .get_mut(index)
            .ok_or(NnError::SequenceIndex { index, batch })?;
        *length = (*length).min(len);
        Ok(())
    }

    /// Empties every sequence (keeps the allocation).
    pub fn reset(&mut self) {
        self.lengths.fill(0);
    }

    /// Checks that `new` positions fit after every sequence.
    pub(crate) fn check_room(&self, new: usize) -> Result<()> {
        match self
            .lengths
            .iter()
            .position(|&length| length + new > self.capacity)
        {
            Some(sequence) => Err(NnError::CacheOverflow {
                sequence,
                length: self.lengths[sequence],
                new,
                capacity: self.capacity,
            }),
            None => Ok(()),
        }
    }

    /// The span a block of `len` new positions will occupy.
    pub(crate) fn span(&self, len: usize) -> Span {
        let first = self.lengths.first().copied().unwrap_or(0);
        if self.lengths.iter().all(|&l| l == first) {
            Span::Uniform { start: first, len }
        } else {
            Span::PerSequence {
                starts: self.lengths.clone(),
                len,
                limit: self.capacity,
            }
        }
    }

    /// Checks that `lens[b]` new positions fit after sequence `b`.
    pub(crate) fn check_room_ragged(&self, lens: &[usize]) -> Result<()> {
        match self
            .lengths
            .iter()
            .zip(lens)
            .position(|(&length, &new)| length + new > self.capacity)
        {
            Some(sequence) => Err(NnError::CacheOverflow {
                sequence,
                length: self.lengths[sequence],
                new: lens[sequence],
                capacity: self.capacity,
            }),
            None => Ok(()),
        }
    }

    /// Records that sequence `b` gained `lens[b]` positions.
    pub(crate) fn advance_ragged(&mut self, lens: &[usize]) {
        for (length, &new) in self.lengths.iter_mut().zip(lens) {
            *length += new;
        }
    }

    /// Per-layer storage, for the model's forward pass.
    pub(crate) fn layers_mut(&mut self) -> &mut [LayerKv] {
        &mut self.layers
    }

    /// Records that `new` positions were written after every sequence.
    pub(crate) fn advance(&mut self, new: usize) {
        for length in &mut self.lengths {
            *length += new;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> KvCache {
        let config = TransformerConfig::tiny().with_d_model(32).with_n_heads(4);
        KvCache::new(&config, 3, 10, &Device::flex()).expect("valid cache")
    }

    #[test]
    fn lengths_truncate_and_reset() {
        let mut c = cache();
        assert!(c.is_empty());
        assert_eq!((c.capacity(), c.batch_size(), c.n_layers()), (10, 3, 2));
        assert_eq!((c.n_heads(), c.head_dim()), (4, 8));
        c.advance(6);
        assert_eq!(c.lengths(), &[6, 6, 6]);
        assert_eq!(c.span(2), Span::Uniform { start: 6, len: 2 });

        c.truncate_seq(1, 2).expect("sequence 1 exists");
        c.truncate_seq(2, 9).expect("sequence 2 exists"); // longer: no effect
        assert_eq!(c.lengths(), &[6, 2, 6]);
        assert_eq!(c.len(), 6);
        assert_eq!(c.remaining(), 4);
        assert_eq!(
            c.span(1),
            Span::PerSequence {
                starts: vec![6, 2, 6],
                len: 1,
                limit: 10
            }
        );
        assert_eq!(
            c.truncate_seq(3, 0),
            Err(NnError::SequenceIndex { index: 3, batch: 3 })
        );

        c.truncate(4);
        assert_eq!(c.lengths(), &[4, 2, 4]);
        c.reset();
        assert_eq!(c.lengths(), &[0, 0, 0]);
    }

    #[test]
    fn room_is_checked_per_sequence() {
        let mut c = cache();
        c.advance(7);
        c.truncate_seq(0, 1).expect("sequence 0 exists");
        assert!(c.check_room(3).is_ok());
        assert_eq!(
            c.check_room(4),
            Err(NnError::CacheOverflow {
                sequence: 1,
                length: 7,
                new: 4,
                capacity: 10
            })
        );
    }
}
