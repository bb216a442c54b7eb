//! [`NativeMtp`] as a [`LanguageModel`] over [`TtsPrompt`]s: every decoder of `voxspec-infer`
//! runs on the engine unchanged.
//!
//! Ragged blocks need no padding: each sequence's rows enter the same weight passes and attend
//! over their own cache only, so a batch equals its sequences run one at a time. Only the rows
//! the request asks for (the last of each block with `last_only`) and only the requested heads
//! are computed.

use voxspec_infer::lm::check_blocks;
use voxspec_infer::{InferError, LanguageModel, Logits, LogitsRequest};
use voxspec_mtp::{FrameTrack, TtsPrompt};

use crate::cache::{NativeCache, ensure};
use crate::error::EngineError;
use crate::model::NativeMtp;
use crate::ops::silu;
use crate::team::{self, Disjoint};

fn model_err(e: impl std::fmt::Display) -> InferError {
    InferError::Model(e.to_string())
}

impl NativeMtp {
    /// The phone track of a prompt for an aligned model (`None` for a plain one), as
    /// `voxspec_mtp`'s own `LanguageModel` builds it: durations from the prompt or, when it has
    /// none, from the Burn model's duration predictor (once per utterance).
    fn prompt_track(&self, prompt: &TtsPrompt) -> Result<Option<(usize, FrameTrack)>, InferError> {
        let invalid = |detail: String| Err(InferError::InvalidRequest { detail });
        if !self.burn.is_aligned() {
            if prompt.durations.is_some() {
                return invalid("durations given to an AR model that is not aligned".into());
            }
            return Ok(None);
        }
        if !prompt.codes.is_empty() {
            return invalid(
                "an aligned AR model does not continue an acoustic prompt (the voice prompt \
                 conditions the NAR stage)"
                    .into(),
            );
        }
        let durations = match &prompt.durations {
            Some(d) => d.clone(),
            None => self
                .burn
                .predict_durations(&prompt.text, 1.0)
                .map_err(model_err)?,
        };
        if durations.len() != prompt.text.len() {
            return invalid(format!(
                "{} durations for {} text tokens",
                durations.len(),
                prompt.text.len()
            ));
        }
        Ok(Some((
            prompt.text.len(),
            FrameTrack::new(&prompt.text, &durations),
        )))
    }

    /// Logits of the rows the last forward left in the cache's scratch.
    fn logits(
        &self,
        cache: &mut NativeCache,
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        let batch = cache.lengths.len();
        let vocab = self.vocab_size();
        let d = self.d;
        let s = &mut cache.scratch;
        // (row of h, sequence, position in the logits)
        s.selected.clear();
        let mut r = 0;
        let mut positions = 1;
        while r < s.rows.len() {
            let b = s.rows[r].0;
            let mut end = r;
            while end < s.rows.len() && s.rows[end].0 == b {
                end += 1;
            }
            if request.last_only {
                s.selected.push((end - 1, b, 0));
            } else {
                s.selected.extend((r..end).map(|row| (row, b, row - r)));
                positions = positions.max(end - r);
            }
            r = end;
        }
        let rows = s.selected.len();
        let heads = &self.heads[..request.heads.min(self.heads.len())];
        ensure(&mut s.sel, rows * d);
        ensure(&mut s.res, heads.len() * rows * d);
        ensure(&mut s.head_out, heads.len() * rows * vocab);
        for (i, &(row, _, _)) in s.selected.iter().enumerate() {
            s.sel[i * d..(i + 1) * d].copy_from_slice(&s.h[row * d..(row + 1) * d]);
        }
        {
            // The heads run in parallel, each on one thread (their products are small: one
            // section for all heads instead of two per head).
            let sel = &s.sel[..rows * d];
            let (res, out) = (Disjoint::new(&mut s.res), Disjoint::new(&mut s.head_out));
            let head_logits = |i: usize| {
                let head = &heads[i];
                // SAFETY: head i writes only its own rows · d residual values and rows · vocab
                // logits.
                let (res, out) = unsafe {
                    (
                        res.range(i * rows * d, rows * d),
                        out.range(i * rows * vocab, rows * vocab),
                    )
                };
                let input = match &head.residual {
                    Some(residual) => {
                        residual.forward(sel, rows, res);
                        for (z, &h) in res.iter_mut().zip(sel) {
                            *z = h + silu(*z);
                        }
                        &*res
                    }
                    None => sel,
                };
                head.out.forward(input, rows, out);
            };
            team::run(heads.len(), &head_logits);
        }
        let mut data = vec![0.0f32; batch * positions * request.heads * vocab];
        for head_index in 0..heads.len() {
            let logits = &s.head_out[head_index * rows * vocab..(head_index + 1) * rows * vocab];
            for (i, &(_, b, p)) in s.selected.iter().enumerate() {
                let at = ((b * positions + p) * request.heads + head_index) * vocab;
                data[at..at + vocab].copy_from_slice(&logits[i * vocab..(i + 1) * vocab]);
            }
        }
        Logits::new(data, [batch, positions, request.heads, vocab])
    }
}

impl LanguageModel for NativeMtp {
    type Prompt = TtsPrompt;
    type Cache = NativeCache;

    fn vocab_size(&self) -> usize {
        self.burn.codebook_size() + 1
    }

    fn n_heads(&self) -> usize {
        self.heads.len()
    }

    fn eos_token(&self) -> Option<u32> {
        Some(self.burn.codebook_size() as u32)
    }

    fn prompt_len(&self, prompt: &TtsPrompt) -> usize {
        prompt.text.len() + 1 + prompt.codes.len()
    }

    fn new_cache(&self, batch: usize, capacity: usize) -> Result<NativeCache, InferError> {
        Ok(self.new_native_cache(batch, capacity)?)
    }

    fn prefill(
        &self,
        cache: &mut NativeCache,
        prompts: &[TtsPrompt],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        request.check(self.heads.len())?;
        if !cache.is_empty() {
            return Err(InferError::InvalidRequest {
                detail: "prefill needs an empty cache".into(),
            });
        }
        if prompts.len() != cache.batch_size() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "{} prompts for a cache of {} sequences",
                    prompts.len(),
                    cache.batch_size()
                ),
            });
        }
        let rows = prompts
            .iter()
            .map(|p| self.burn.prefix_ids(&p.text, &p.codes).map_err(model_err))
            .collect::<Result<Vec<_>, _>>()?;
        for (b, p) in prompts.iter().enumerate() {
            cache.tracks[b] = self.prompt_track(p)?;
        }
        self.forward_ids(cache, &rows, true)?;
        self.logits(
            cache,
            LogitsRequest {
                last_only: true,
                ..request
            },
        )
    }

    fn extend(
        &self,
        cache: &mut NativeCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        request.check(self.heads.len())?;
        check_blocks(blocks, cache.batch_size(), self.vocab_size())?;
        let rows = blocks
            .iter()
            .map(|b| self.burn.code_ids(b).map_err(model_err))
            .collect::<Result<Vec<_>, _>>()?;
        self.forward_ids(cache, &rows, request.last_only)?;
        self.logits(cache, request)
    }

    fn cache_len(&self, cache: &NativeCache, b: usize) -> usize {
        cache.lengths.get(b).copied().unwrap_or(0)
    }

    fn truncate(&self, cache: &mut NativeCache, b: usize, len: usize) -> Result<(), InferError> {
        cache.truncate(b, len).map_err(|e: EngineError| e.into())
    }
}
