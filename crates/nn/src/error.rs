//! The error type of `voxspec-nn`. Every variant names the lengths or shapes at fault.

/// Everything that can go wrong when building or running a transformer stack.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NnError {
    /// The configuration cannot describe a model.
    #[error("invalid transformer config: {detail}")]
    InvalidConfig {
        /// What is wrong, with the values involved.
        detail: String,
    },
    /// A matrix-product precision this CPU cannot run, or a name that is none.
    #[error("{detail}")]
    Precision {
        /// What was asked and why it cannot be.
        detail: String,
    },
    /// The input is not `[batch ≥ 1, time ≥ 1, d_model]`.
    #[error("input has shape {shape:?}; expected [batch >= 1, time >= 1, {d_model}]")]
    InputShape {
        /// The shape received.
        shape: [usize; 3],
        /// The model width.
        d_model: usize,
    },
    /// The row lengths of a ragged block are not one per sequence, each at most the width.
    #[error("ragged block of {batch} rows, {width} wide: row lengths {lens:?}")]
    RowLengths {
        /// Sequences in the batch.
        batch: usize,
        /// Width of the block.
        width: usize,
        /// The lengths received.
        lens: Vec<usize>,
    },
    /// The padding mask is not `[batch, time]` of the input.
    #[error("padding mask has shape {mask:?}; expected [{batch}, {time}] like the input")]
    MaskShape {
        /// The shape received.
        mask: [usize; 2],
        /// Batch size of the input.
        batch: usize,
        /// Time steps of the input.
        time: usize,
    },
    /// A full forward pass got more positions than the position tables hold.
    #[error("sequence of {time} positions exceeds max_seq_len {max_seq_len}")]
    SequenceTooLong {
        /// Time steps of the input.
        time: usize,
        /// The model's `max_seq_len`.
        max_seq_len: usize,
    },
    /// Writing `new` positions after `length` cached ones would pass the cache capacity.
    #[error(
        "KV cache overflow: sequence {sequence} holds {length} positions and {new} more \
         would exceed the capacity {capacity}"
    )]
    CacheOverflow {
        /// Index of the first sequence in the batch that overflows.
        sequence: usize,
        /// Its cached length.
        length: usize,
        /// Positions in the new block.
        new: usize,
        /// The cache capacity.
        capacity: usize,
    },
    /// A cache longer than the model's position tables was requested or passed.
    #[error("KV cache capacity {capacity} exceeds the model's max_seq_len {max_seq_len}")]
    CapacityTooLarge {
        /// Requested capacity.
        capacity: usize,
        /// The model's `max_seq_len`.
        max_seq_len: usize,
    },
    /// The cache was built for a model of another shape.
    #[error(
        "KV cache layout (layers {cache_layers}, heads {cache_heads}, head_dim {cache_head_dim}) \
         does not match the model (layers {layers}, heads {heads}, head_dim {head_dim})"
    )]
    CacheLayout {
        /// Layers in the cache.
        cache_layers: usize,
        /// Heads in the cache.
        cache_heads: usize,
        /// Head width in the cache.
        cache_head_dim: usize,
        /// Layers in the model.
        layers: usize,
        /// Heads in the model.
        heads: usize,
        /// Head width in the model.
        head_dim: usize,
    },
    /// The input batch size differs from the cache's.
    #[error("input batch {input} does not match the KV cache batch {cache}")]
    BatchMismatch {
        /// Batch size of the input.
        input: usize,
        /// Batch size of the cache.
        cache: usize,
    },
    /// A per-sequence operation named a sequence outside the batch.
    #[error("sequence index {index} is out of range for a KV cache batch of {batch}")]
    SequenceIndex {
        /// The index given.
        index: usize,
        /// Batch size of the cache.
        batch: usize,
    },
    /// `forward_cached` was called on a bidirectional stack.
    #[error("forward_cached needs a causal transformer; this stack is bidirectional")]
    NotCausal,
}

/// `Result` with [`NnError`].
pub type Result<T> = std::result::Result<T, NnError>;
