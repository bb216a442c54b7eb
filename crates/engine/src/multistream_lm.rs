//! [`NativeMultiStream`] as a [`FrameModel`] over `MsPrompt`s: the frame decoders of
//! `voxspec-infer` (AR, MTP, speculative) run on the engine unchanged, with the semantics of
//! `voxspec_multistream::MsFrameLm`.
//!
//! ```text
//! cache:   [voice | text | column 0 … column n−1]      (NativeCache of batch 1)
//! prefill: voice, text and the known leading columns in one forward; logits of the last
//! extend:  k columns in one forward, their step-track ids from the step index; logits of each
//! truncate(n): the cache back to voice + text + n positions, O(1) (the track needs no rollback)
//! head_logits(n): heads 0..n on the hidden state after the last step fed
//! ```
//!
//! One difference: `MsFrameLm` keeps the last hidden state only for a model with extra heads,
//! so its `head_logits(cache, 1)` fails on a model without them; here it returns head 0's
//! logits (the engine keeps the `[d]` hidden state of every forward). Everything else —
//! logits, errors, the rollback of the heads on truncation — follows `MsFrameLm`.

use std::cell::RefCell;

use voxspec_infer::{FrameLogits, FrameModel, InferError, check_columns};
use voxspec_multistream::{MsPrompt, StepTrack};

use crate::cache::{NativeCache, ensure};
use crate::error::EngineError;
use crate::multistream::NativeMultiStream;
use crate::ops::silu;

/// Decoding state of one utterance on [`NativeMultiStream`]: the KV cache and what
/// `voxspec_multistream::MsCache` holds besides it.
#[derive(Debug, Clone)]
pub struct NativeMsCache {
    native: NativeCache,
    /// Voice and text positions before step 0.
    prefix: usize,
    steps: usize,
    track: Option<StepTrack>,
    /// `[d]`: the final hidden state after the last step fed, valid while `has_last`.
    last_hidden: Vec<f32>,
    /// Cleared by a truncation below the steps held, set by every forward.
    has_last: bool,
    /// `[d]`: a Medusa head's residual branch in [`FrameModel::head_logits`] (which reads the
    /// cache through `&`).
    head_scratch: RefCell<Vec<f32>>,
}

impl NativeMsCache {
    /// The KV cache (batch 1).
    pub fn native(&self) -> &NativeCache {
        &self.native
    }

    /// Voice and text positions before step 0.
    pub fn prefix(&self) -> usize {
        self.prefix
    }

    /// Steps held.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The step track of an aligned model's utterance.
    pub fn track(&self) -> Option<&StepTrack> {
        self.track.as_ref()
    }
}

fn invalid(detail: String) -> InferError {
    InferError::InvalidRequest { detail }
}

impl NativeMultiStream {
    /// Runs the conditioning of `prompt` (prefill: voice, text) and `columns` (step-major, K
    /// ids each, checked by the caller) at steps `cache.steps..`, in one forward, and returns
    /// the logits of the last position (`last_only`) or of every column.
    ///
    /// # Shapes
    /// - `columns`: `[n][K]`, ids `< codebook_size + 1`
    /// - output: `[1 or n][K][codebook_size + 1]`
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] for a voice vector the model cannot take, a text id
    /// `≥ text_vocab`, an aligned model's cache without a step track; [`InferError::Model`]
    /// past the cache's capacity. On error the cache is unchanged.
    fn run(
        &self,
        cache: &mut NativeMsCache,
        prompt: Option<&MsPrompt>,
        columns: &[Vec<u32>],
        last_only: bool,
    ) -> Result<FrameLogits, InferError> {
        let d = self.d;
        let voice = prompt.and_then(|p| p.voice.as_deref());
        let text = prompt.map_or(&[][..], |p| p.text.as_slice());
        let g = self.config.global_dim;
        if let Some(v) = voice {
            if g == 0 {
                return Err(invalid(
                    "row 0 has a voice vector; the model has no global_dim".into(),
                ));
            }
            if v.len() != g {
                return Err(invalid(format!(
                    "row 0: voice vector of {} values, global_dim {g}",
                    v.len()
                )));
            }
        }
        if let Some(&t) = text.iter().find(|&&t| t as usize >= self.config.text_vocab) {
            return Err(invalid(format!(
                "text token {t} outside the vocabulary of {}",
                self.config.text_vocab
            )));
        }
        let step_track = match (&self.track, &cache.track) {
            (Some(table), Some(track)) => Some((table, track)),
            (Some(_), None) => {
                return Err(invalid(
                    "an aligned model needs the step track of its prompt".into(),
                ));
            }
            (None, _) => None,
        };
        let n = columns.len();
        let m = usize::from(voice.is_some()) + text.len() + n;
        let length = cache.native.lengths[0];
        if length + m > cache.native.capacity {
            return Err(EngineError::CacheOverflow {
                sequence: 0,
                length,
                new: m,
                capacity: cache.native.capacity,
            }
            .into());
        }
        let from = cache.steps;

        let s = &mut cache.native.scratch;
        s.rows.clear();
        s.rows.extend((0..m).map(|i| (0, length + i)));
        ensure(&mut s.x, m * d);
        ensure(&mut s.h, m * d);
        // [m, d] input embeddings; `h` is free until the stack runs: its first row is a
        // temporary.
        let mut r = 0;
        if let Some(v) = voice {
            self.embed_voice(v, &mut s.h[..d], &mut s.x[..d]);
            r = 1;
        }
        for &t in text {
            self.embed_text(t, &mut s.x[r * d..(r + 1) * d]);
            r += 1;
        }
        for (i, column) in columns.iter().enumerate() {
            s.track_ids.clear();
            if let Some((table, track)) = step_track {
                track.push_step(
                    from + i,
                    self.config.text_vocab,
                    &table.align,
                    &mut s.track_ids,
                );
                if let Some(&id) = s.track_ids.iter().find(|&&id| id >= table.none_id) {
                    return Err(invalid(format!(
                        "step-track id {id} outside the {} ids of the track embedding \
                         (a track built for another configuration)",
                        table.none_id
                    )));
                }
            }
            self.embed_step(
                column,
                &s.track_ids,
                &mut s.h[..d],
                &mut s.x[r * d..(r + 1) * d],
            );
            r += 1;
        }

        self.stack.forward(&mut cache.native, &[m], false);
        cache.steps += n;
        let h = &cache.native.scratch.h;
        cache.last_hidden.copy_from_slice(&h[(m - 1) * d..m * d]);
        cache.has_last = true;
        let (first, count) = if last_only { (m - 1, 1) } else { (m - n, n) };
        let width = self.streams * self.vocab;
        let mut data = vec![0.0f32; count * width];
        self.heads.forward(&h[first * d..], count, &mut data);
        FrameLogits::new(data, count, self.streams, self.vocab)
    }
}

impl FrameModel for NativeMultiStream {
    type Prompt = MsPrompt;
    type Cache = NativeMsCache;

    fn streams(&self) -> usize {
        self.streams
    }

    fn vocab(&self) -> usize {
        self.vocab
    }

    fn delays(&self) -> Vec<usize> {
        (0..self.streams).map(|j| self.config.delay * j).collect()
    }

    fn new_cache(
        &self,
        prompt: &MsPrompt,
        capacity_steps: usize,
    ) -> voxspec_infer::Result<NativeMsCache> {
        let prefix = usize::from(prompt.voice.is_some()) + prompt.text.len();
        let native = self.stack.new_cache(1, prefix + capacity_steps)?;
        Ok(NativeMsCache {
            native,
            prefix,
            steps: 0,
            track: prompt.track.clone(),
            last_hidden: vec![0.0; self.d],
            has_last: false,
            head_scratch: RefCell::new(vec![0.0; self.d]),
        })
    }

    /// # Shapes
    /// - `columns`: `[n][K]` (n ≥ 1), ids `< codebook_size + 1`
    /// - output: `[1][K][codebook_size + 1]`, after the last column
    fn prefill(
        &self,
        cache: &mut NativeMsCache,
        prompt: &MsPrompt,
        columns: &[Vec<u32>],
    ) -> voxspec_infer::Result<FrameLogits> {
        check_columns(columns, self.streams, self.vocab)?;
        if cache.steps != 0 || !cache.native.is_empty() {
            return Err(invalid("prefill needs an empty cache".into()));
        }
        self.run(cache, Some(prompt), columns, true)
    }

    /// # Shapes
    /// - `columns`: `[n][K]` (n ≥ 1), ids `< codebook_size + 1`
    /// - output: `[n][K][codebook_size + 1]`, after each column
    fn extend(
        &self,
        cache: &mut NativeMsCache,
        columns: &[Vec<u32>],
    ) -> voxspec_infer::Result<FrameLogits> {
        check_columns(columns, self.streams, self.vocab)?;
        self.run(cache, None, columns, false)
    }

    fn steps(&self, cache: &NativeMsCache) -> usize {
        cache.steps
    }

    fn truncate(&self, cache: &mut NativeMsCache, steps: usize) -> voxspec_infer::Result<()> {
        if steps > cache.steps {
            return Err(invalid(format!(
                "truncate to {steps} steps of {}",
                cache.steps
            )));
        }
        cache.native.truncate(0, cache.prefix + steps)?;
        if steps < cache.steps {
            cache.has_last = false;
        }
        cache.steps = steps;
        Ok(())
    }

    fn heads(&self) -> usize {
        1 + self.ahead.len()
    }

    /// # Shapes
    /// - output: `[heads][K][codebook_size + 1]`, head-major
    fn head_logits(
        &self,
        cache: &NativeMsCache,
        heads: usize,
    ) -> voxspec_infer::Result<FrameLogits> {
        if heads == 0 || heads > FrameModel::heads(self) {
            return Err(InferError::InvalidSetting {
                name: "heads",
                value: heads.to_string(),
                expected: format!("1 to the model's {}", FrameModel::heads(self)),
            });
        }
        if !cache.has_last {
            return Err(invalid(
                "no step fed since the cache was filled or rolled back".into(),
            ));
        }
        let (d, width) = (self.d, self.streams * self.vocab);
        let x = &cache.last_hidden;
        let mut data = vec![0.0f32; heads * width];
        self.heads.forward(x, 1, &mut data[..width]);
        let mut z = cache.head_scratch.borrow_mut();
        ensure(&mut z, d);
        for (i, head) in self.ahead[..heads - 1].iter().enumerate() {
            head.residual.forward(x, 1, &mut z[..d]);
            for (zv, &xv) in z[..d].iter_mut().zip(x) {
                *zv = xv + silu(*zv);
            }
            let at = (i + 1) * width;
            head.outs.forward(&z[..d], 1, &mut data[at..at + width]);
        }
        FrameLogits::new(data, heads, self.streams, self.vocab)
    }
}
