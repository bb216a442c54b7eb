//! The language-model interface every decoder drives.
//!
//! A decoder never knows which network, backend or implementation computes the scores: it
//! prefills a batch of prompts, then extends each sequence by blocks of tokens and reads back
//! logits, and rolls sequences back after rejected speculation. One call scores a block of new
//! positions (1 for plain AR, γ + 1 for verification, the MTP heads at the last position), so
//! a model that reads its weights once per call makes speculation pay.
//!
//! ```text
//!            prefill(prompts)                extend([[a, b, c], [d, e, f]])      truncate(1, len)
//! cache:  [p p p p]              →  [p p p p a b c]                        →  [p p p p a]   (seq 1)
//! logits: last prompt position       one row per new position and head
//! ```

use crate::error::{InferError, Result};

/// Which outputs a forward call must return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogitsRequest {
    /// Prediction heads wanted, `1..=model.n_heads()`: head 0 predicts the next token, head
    /// `i` the token `i` steps after it (MTP).
    pub heads: usize,
    /// Only the last new position of each sequence (MTP without verification) instead of every
    /// new position (verification). A model may skip work for the positions not returned.
    pub last_only: bool,
}

impl LogitsRequest {
    /// Head 0 at every new position: plain AR and speculative verification.
    pub fn next_token() -> Self {
        Self {
            heads: 1,
            last_only: false,
        }
    }

    /// `heads` heads at the last new position only.
    pub fn heads_at_last(heads: usize) -> Self {
        Self {
            heads,
            last_only: true,
        }
    }

    /// Checks `1 ≤ heads ≤ n_heads` for a model with `n_heads` heads.
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] naming both numbers.
    pub fn check(&self, n_heads: usize) -> Result<()> {
        if self.heads == 0 || self.heads > n_heads {
            return Err(InferError::InvalidRequest {
                detail: format!("{} heads requested from a model with {n_heads}", self.heads),
            });
        }
        Ok(())
    }
}

/// Unnormalised scores on the host, laid out `[batch, positions, heads, vocab]` row-major.
///
/// `positions` is the longest block of the call (1 when only the last position was asked
/// for); for a sequence whose block was shorter, the rows past its block are unspecified.
/// With `last_only`, position 0 of sequence `b` is its last new position.
#[derive(Debug, Clone, PartialEq)]
pub struct Logits {
    data: Vec<f32>,
    shape: [usize; 4],
}

impl Logits {
    /// Wraps a row-major buffer of shape `[batch, positions, heads, vocab]`.
    ///
    /// # Errors
    /// [`InferError::LogitsShape`] when the buffer's length is not the product of the shape,
    /// or a dimension is 0.
    pub fn new(data: Vec<f32>, shape: [usize; 4]) -> Result<Self> {
        if shape.contains(&0) || data.len() != shape.iter().product::<usize>() {
            return Err(InferError::LogitsShape {
                shape,
                len: data.len(),
            });
        }
        Ok(Self { data, shape })
    }

    /// `[batch, positions, heads, vocab]`.
    pub fn shape(&self) -> [usize; 4] {
        self.shape
    }

    /// Vocabulary size.
    pub fn vocab(&self) -> usize {
        self.shape[3]
    }

    /// The scores of sequence `b`, position `pos`, head `head` (panics out of range: indices
    /// come from the decoder, never from user input).
    pub fn row(&self, b: usize, pos: usize, head: usize) -> &[f32] {
        let [_, positions, heads, vocab] = self.shape;
        let start = ((b * positions + pos) * heads + head) * vocab;
        &self.data[start..start + vocab]
    }

    /// The whole buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Checks that a model returned `[batch, ≥ positions, heads, vocab]`, so that a decoder
    /// reading rows within those bounds cannot go out of range.
    ///
    /// # Errors
    /// [`InferError::Model`] with the shape received and the one expected.
    pub fn check(&self, batch: usize, positions: usize, heads: usize, vocab: usize) -> Result<()> {
        let [b, p, h, v] = self.shape;
        if b != batch || p < positions || h != heads || v != vocab {
            return Err(InferError::Model(format!(
                "model returned logits of shape {:?}, expected [{batch}, >= {positions}, {heads}, {vocab}]",
                self.shape
            )));
        }
        Ok(())
    }
}

/// A token-level autoregressive model with an external, truncatable cache.
///
/// Implemented by the MTP AR model (voxspec-mtp), draft models and the toy models of the tests.
/// `&self` methods: the model is immutable during decoding; all state lives in the cache.
pub trait LanguageModel {
    /// What a sequence is conditioned on (for TTS: text tokens and the acoustic prompt's codes;
    /// for a plain LM: a token list).
    type Prompt: Clone;
    /// Per-batch decoding state: KV caches and anything else the model keeps between calls.
    type Cache;

    /// Output vocabulary size (the tokens decoders emit, end-of-sequence included).
    fn vocab_size(&self) -> usize;

    /// Number of prediction heads (1 for a plain LM; 1 + extra heads for MTP).
    fn n_heads(&self) -> usize;

    /// The end-of-sequence token, if the model has one.
    fn eos_token(&self) -> Option<u32>;

    /// Positions `prompt` occupies in the cache after [`prefill`](Self::prefill): decoders size
    /// caches with it (`prompt_len + max_tokens`, plus any speculation lookahead).
    fn prompt_len(&self, prompt: &Self::Prompt) -> usize;

    /// Fresh state for `batch` sequences of up to `capacity` positions (prompt included).
    fn new_cache(&self, batch: usize, capacity: usize) -> Result<Self::Cache>;

    /// Runs the prompts (one per sequence of the cache) and returns the logits at each
    /// prompt's last position, `[batch, 1, heads, vocab]`. The cache must be empty.
    fn prefill(
        &self,
        cache: &mut Self::Cache,
        prompts: &[Self::Prompt],
        request: LogitsRequest,
    ) -> Result<Logits>;

    /// Appends `blocks[b]` to sequence `b` and returns logits for the new positions,
    /// `[batch, max block length (or 1 with last_only), heads, vocab]`. Blocks may differ in
    /// length; an empty block (a sequence that has finished) leaves that sequence's cache as it
    /// is and its logits rows unspecified, but at least one block must be non-empty. A model may
    /// implement this by padding the short blocks and truncating those sequences back: the
    /// result must equal calling it one sequence at a time. [`check_blocks`] validates the
    /// arguments.
    fn extend(
        &self,
        cache: &mut Self::Cache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits>;

    /// Positions held for sequence `b` (prompt included).
    fn cache_len(&self, cache: &Self::Cache, b: usize) -> usize;

    /// Rolls sequence `b` back to its first `len` positions (`len ≤ cache_len`), O(1).
    fn truncate(&self, cache: &mut Self::Cache, b: usize, len: usize) -> Result<()>;
}

/// Checks the arguments of [`LanguageModel::extend`]: one block per sequence of a `batch`, at
/// least one non-empty, every token below `vocab`. Returns the longest block's length.
///
/// # Errors
/// [`InferError::InvalidRequest`] naming the sequence and token at fault.
pub fn check_blocks(blocks: &[Vec<u32>], batch: usize, vocab: usize) -> Result<usize> {
    if blocks.len() != batch {
        return Err(InferError::InvalidRequest {
            detail: format!("{} blocks for a cache of {batch} sequences", blocks.len()),
        });
    }
    for (b, block) in blocks.iter().enumerate() {
        if let Some(&t) = block.iter().find(|&&t| t as usize >= vocab) {
            return Err(InferError::InvalidRequest {
                detail: format!("token {t} of sequence {b} is outside the vocabulary of {vocab}"),
            });
        }
    }
    let longest = blocks.iter().map(Vec::len).max().unwrap_or(0);
    if longest == 0 {
        return Err(InferError::InvalidRequest {
            detail: "extend called with every block empty".into(),
        });
    }
    Ok(longest)
}
