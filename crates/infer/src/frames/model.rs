//! [`FrameModel`]: the host-side interface of a delayed multi-stream LM, as [`crate::LanguageModel`]
//! is for single-stream models.
//!
//! The model reads one *column* per step (the `K` input ids of that step, summed embeddings in
//! SoCodec's LM) and returns, per step fed, one row of logits per stream head. The logits after
//! step `s` predict the column of step `s + 1`. Each head scores `vocab = codebook_size + 1`
//! classes: the codes, and end-of-sequence at `codebook_size`, which is also the input id of
//! the special token `S`.
//!
//! ```text
//!            prefill(prompt, columns 0..=n)      extend([c_{n+1}, c_{n+2}])        truncate(n + 2)
//! cache:  [c0 … cn]                     →  [c0 … cn c_{n+1} c_{n+2}]        →  [c0 … c_{n+1}]
//! logits: after cn: [1][K][vocab]          after c_{n+1}, after c_{n+2}: [2][K][vocab]
//! ```

use crate::error::{InferError, Result};

/// Logits of `steps` consecutive steps, `[steps][streams][vocab]` row-major: row `(i, j)` is
/// head `j`'s scores after the `i`-th column of the call.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameLogits {
    data: Vec<f32>,
    shape: [usize; 3],
}

impl FrameLogits {
    /// Wraps a row-major buffer of shape `[steps, streams, vocab]`.
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] when a dimension is 0 or the buffer's length is not the
    /// product of the shape.
    pub fn new(data: Vec<f32>, steps: usize, streams: usize, vocab: usize) -> Result<Self> {
        let shape = [steps, streams, vocab];
        if shape.contains(&0) || data.len() != steps * streams * vocab {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "frame logits buffer of {} values does not match shape {shape:?}",
                    data.len()
                ),
            });
        }
        Ok(Self { data, shape })
    }

    /// `[steps, streams, vocab]`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Steps held.
    pub fn steps(&self) -> usize {
        self.shape[0]
    }

    /// Head `stream`'s scores after the `step`-th column of the call (panics out of range:
    /// indices come from the decoders, which [`check`](Self::check) the shape first).
    pub fn row(&self, step: usize, stream: usize) -> &[f32] {
        let [_, streams, vocab] = self.shape;
        let start = (step * streams + stream) * vocab;
        &self.data[start..start + vocab]
    }

    /// The whole buffer.
    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    /// Checks that a model returned `[steps, streams, vocab]`, so that a decoder reading rows
    /// cannot go out of range.
    ///
    /// # Errors
    /// [`InferError::Model`] with the shape received and the one expected.
    pub fn check(&self, steps: usize, streams: usize, vocab: usize) -> Result<()> {
        if self.shape != [steps, streams, vocab] {
            return Err(InferError::Model(format!(
                "frame model returned logits of shape {:?}, expected [{steps}, {streams}, {vocab}]",
                self.shape
            )));
        }
        Ok(())
    }
}

/// A delayed multi-stream autoregressive model with an external, truncatable cache (one
/// sequence per cache).
///
/// Implemented by the multi-stream LM's host adapter and by the toy [`crate::TableFrameLm`].
/// `&self` methods: the model is immutable during decoding; all state lives in the cache.
/// Columns are step-major everywhere: `columns[i]` is the `i`-th step fed, `K` input ids in
/// `0..vocab` (codes, or the special token `S = codebook_size`).
pub trait FrameModel {
    /// What an utterance is conditioned on besides its acoustic prompt (text tokens, a voice
    /// vector). The acoustic prompt's codes reach the model as the leading columns of
    /// [`prefill`](Self::prefill).
    type Prompt: Clone;
    /// Decoding state of one sequence: KV caches and anything else kept between calls.
    type Cache;

    /// Number of streams `K` (heads and input ids per step).
    fn streams(&self) -> usize;

    /// Classes per head: `codebook_size + 1` (the codes and end-of-sequence).
    fn vocab(&self) -> usize;

    /// The special input id `S`, equal to the end-of-sequence class: `codebook_size`.
    fn special(&self) -> u32 {
        self.vocab().saturating_sub(1) as u32
    }

    /// The delay of each stream in steps (`K` values, non-decreasing, as
    /// `voxspec_data::DelayPattern` requires).
    fn delays(&self) -> Vec<usize>;

    /// Fresh state for one sequence conditioned on `prompt` holding up to `capacity_steps`
    /// steps (the model adds whatever room its conditioning needs).
    fn new_cache(&self, prompt: &Self::Prompt, capacity_steps: usize) -> Result<Self::Cache>;

    /// Runs the conditioning and the known leading `columns` (step 0 = `S` in every stream,
    /// then the steps holding only prompt frames or `S`; at least one) on an empty cache and
    /// returns the logits after the last column, `[1][K][vocab]`.
    fn prefill(
        &self,
        cache: &mut Self::Cache,
        prompt: &Self::Prompt,
        columns: &[Vec<u32>],
    ) -> Result<FrameLogits>;

    /// Appends `columns` (at least one) and returns the logits after each, `[n][K][vocab]`.
    fn extend(&self, cache: &mut Self::Cache, columns: &[Vec<u32>]) -> Result<FrameLogits>;

    /// Steps held (prefilled columns included).
    fn steps(&self, cache: &Self::Cache) -> usize;

    /// Rolls the cache back to its first `steps` steps (`steps ≤ self.steps(cache)`).
    fn truncate(&self, cache: &mut Self::Cache, steps: usize) -> Result<()>;

    /// Prediction heads per position: head 0 predicts the next step (the logits
    /// [`prefill`](Self::prefill) and [`extend`](Self::extend) return), head `i` the step `i`
    /// after it (multi-token prediction). 1 for a model without extra heads.
    fn heads(&self) -> usize {
        1
    }

    /// The logits of heads `0..heads` after the last step held, `[heads][K][vocab]` (head-major,
    /// read with [`FrameLogits::row`]`(head, stream)`).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when `heads` exceeds [`heads`](Self::heads) (the default
    /// implementation has none to read); [`InferError::InvalidRequest`] on an empty cache.
    fn head_logits(&self, cache: &Self::Cache, heads: usize) -> Result<FrameLogits> {
        let _ = cache;
        Err(InferError::InvalidSetting {
            name: "heads",
            value: heads.to_string(),
            expected: "a model with multi-token heads".into(),
        })
    }
}

/// Checks columns handed to [`FrameModel::prefill`] or [`FrameModel::extend`]: at least one,
/// each of `streams` ids below `vocab`.
///
/// # Errors
/// [`InferError::InvalidRequest`] naming the column and id at fault.
pub fn check_columns(columns: &[Vec<u32>], streams: usize, vocab: usize) -> Result<()> {
    if columns.is_empty() {
        return Err(InferError::InvalidRequest {
            detail: "no column to feed".into(),
        });
    }
    for (i, column) in columns.iter().enumerate() {
        if column.len() != streams {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "column {i} holds {} ids for a model of {streams} streams",
                    column.len()
                ),
            });
        }
        if let Some(&id) = column.iter().find(|&&id| id as usize >= vocab) {
            return Err(InferError::InvalidRequest {
                detail: format!("column {i} holds id {id}, outside the input ids 0..{vocab}"),
            });
        }
    }
    Ok(())
}

/// A shared reference decodes as the model itself (a speculative decoder owns its draft, and a
/// draft is often borrowed).
impl<M: FrameModel + ?Sized> FrameModel for &M {
    type Prompt = M::Prompt;
    type Cache = M::Cache;

    fn streams(&self) -> usize {
        (**self).streams()
    }
    fn vocab(&self) -> usize {
        (**self).vocab()
    }
    fn special(&self) -> u32 {
        (**self).special()
    }
    fn delays(&self) -> Vec<usize> {
        (**self).delays()
    }
    fn new_cache(&self, prompt: &Self::Prompt, capacity_steps: usize) -> Result<Self::Cache> {
        (**self).new_cache(prompt, capacity_steps)
    }
    fn prefill(
        &self,
        cache: &mut Self::Cache,
        prompt: &Self::Prompt,
        columns: &[Vec<u32>],
    ) -> Result<FrameLogits> {
        (**self).prefill(cache, prompt, columns)
    }
    fn extend(&self, cache: &mut Self::Cache, columns: &[Vec<u32>]) -> Result<FrameLogits> {
        (**self).extend(cache, columns)
    }
    fn steps(&self, cache: &Self::Cache) -> usize {
        (**self).steps(cache)
    }
    fn truncate(&self, cache: &mut Self::Cache, steps: usize) -> Result<()> {
        (**self).truncate(cache, steps)
    }
    fn heads(&self) -> usize {
        (**self).heads()
    }
    fn head_logits(&self, cache: &Self::Cache, heads: usize) -> Result<FrameLogits> {
        (**self).head_logits(cache, heads)
    }
}
