//! [`MtpModel`] as a [`LanguageModel`]: the decoders of `voxspec-infer` drive it through a KV
//! cache, one block of new codes per call.
//!
//! Ragged blocks (sequences that accepted different numbers of tokens) are run as one padded
//! block through [`voxspec_nn::Transformer::forward_cached_ragged`], which stores only each
//! sequence's real positions, so each sequence is exactly as if it had been run alone
//! (attention never reaches past a sequence's own length) and needs room for its own block only.

use burn::tensor::{Int, Tensor, TensorData};
use voxspec_infer::lm::check_blocks;
use voxspec_infer::{InferError, LanguageModel, Logits, LogitsRequest};
use voxspec_nn::KvCache;

use crate::error::MtpError;
use crate::model::MtpModel;
use crate::track::FrameTrack;

/// What a TTS sequence is conditioned on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtsPrompt {
    /// Text tokens: the prompt's transcript followed by the text to speak (VALL-E continuation).
    pub text: Vec<u32>,
    /// Stream-0 codes of the acoustic prompt (may be empty; aligned models take none).
    pub codes: Vec<u32>,
    /// Aligned models: frames per text token. `None` lets the model's duration predictor
    /// choose them at prefill; plain models take none.
    pub durations: Option<Vec<u32>>,
}

impl TtsPrompt {
    /// A prompt of text and acoustic-prompt codes, durations left to the model.
    pub fn new(text: Vec<u32>, codes: Vec<u32>) -> Self {
        Self {
            text,
            codes,
            durations: None,
        }
    }
}

/// Decoding state of a batch: the KV cache and, for an aligned model, each sequence's phone
/// track (a function of the position, so truncating the cache is the whole rollback).
#[derive(Debug, Clone)]
pub struct MtpCache {
    /// Keys and values of every layer.
    pub kv: KvCache,
    /// Per sequence: the number of text tokens before SEP and the frame track.
    tracks: Vec<Option<(usize, FrameTrack)>>,
}

impl MtpCache {
    /// The track of sequence `b` (aligned models, after prefill).
    pub fn track(&self, b: usize) -> Option<&FrameTrack> {
        self.tracks.get(b).and_then(|t| t.as_ref().map(|(_, t)| t))
    }
}

fn infer_err(e: impl Into<MtpError>) -> InferError {
    InferError::Model(e.into().to_string())
}

impl MtpModel {
    /// Runs `rows` (one per sequence, ragged) through the cache; returns the hidden states
    /// `[batch, max_len, d_model]` and leaves sequence `b` extended by `rows[b].len()`.
    fn run_rows(&self, cache: &mut MtpCache, rows: &[Vec<u32>]) -> Result<Tensor<3>, InferError> {
        let before: Vec<usize> = cache.kv.lengths().to_vec();
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if rows.len() != before.len() || width == 0 {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "expected {} blocks, at least one non-empty; got lengths {:?}",
                    before.len(),
                    rows.iter().map(Vec::len).collect::<Vec<_>>()
                ),
            });
        }
        // Short (or empty: finished) rows are padded with the separator id, then cut back.
        let pad = self.text_vocab() as u32;
        let padded: Vec<Vec<u32>> = rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.resize(width, pad);
                r
            })
            .collect();
        let track = match self.track.as_ref().map(|t| t.layout()) {
            None => None,
            Some(layout) => {
                let mut ids = Vec::with_capacity(rows.len() * width * layout.slots());
                for (b, &start) in before.iter().enumerate() {
                    let Some(Some((text_len, track))) = cache.tracks.get(b) else {
                        return Err(InferError::InvalidRequest {
                            detail: format!("sequence {b} has no phone track (prefill first)"),
                        });
                    };
                    for pos in start..start + width {
                        match pos.checked_sub(*text_len) {
                            Some(frame) => track.push_ids(frame, &layout, &mut ids),
                            None => FrameTrack::push_none(1, &layout, &mut ids),
                        }
                    }
                }
                Some(ids)
            }
        };
        let x = self.embed_rows(&padded, width, track).map_err(infer_err)?;
        let lens: Vec<usize> = rows.iter().map(Vec::len).collect();
        // Only the real positions are stored (and need room): a sequence at the end of its
        // capacity, or finished, can share a batch with a wider block.
        self.transformer
            .forward_cached_ragged(x, &lens, &mut cache.kv)
            .map_err(infer_err)
    }

    /// Logits for `request` from hidden states of ragged rows.
    fn logits(
        &self,
        hidden: Tensor<3>,
        lens: &[usize],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        request.check(self.n_heads())?;
        let [batch, time, d] = hidden.dims();
        let hidden = if request.last_only {
            // An empty (finished) row has no last position: its row is unspecified, use 0.
            let idx: Vec<i64> = lens.iter().map(|&l| l.saturating_sub(1) as i64).collect();
            let idx = Tensor::<1, Int>::from_data(TensorData::new(idx, [batch]), &hidden.device());
            // [batch, 1, d]: row b picks position lens[b] - 1
            let idx = idx.reshape([batch, 1, 1]).repeat_dim(2, d);
            hidden.gather(1, idx)
        } else {
            hidden
        };
        let positions = if request.last_only { 1 } else { time };
        // heads × [batch, positions, vocab] → [batch, positions, heads, vocab]
        let stacked: Tensor<4> = Tensor::stack(self.head_logits(hidden, request.heads), 2);
        let vocab = self.codebook_size() + 1;
        let data = stacked
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| InferError::Model(format!("cannot read logits: {e:?}")))?;
        Logits::new(data, [batch, positions, request.heads, vocab])
    }
}

impl MtpModel {
    /// The phone track of a prompt for an aligned model (`None` for a plain one).
    fn prompt_track(&self, prompt: &TtsPrompt) -> Result<Option<(usize, FrameTrack)>, MtpError> {
        if !self.is_aligned() {
            if prompt.durations.is_some() {
                return Err(MtpError::InvalidInput {
                    detail: "durations given to an AR model that is not aligned".into(),
                });
            }
            return Ok(None);
        }
        if !prompt.codes.is_empty() {
            return Err(MtpError::InvalidInput {
                detail: "an aligned AR model does not continue an acoustic prompt (the voice \
                         prompt conditions the NAR stage)"
                    .into(),
            });
        }
        let durations = match &prompt.durations {
            Some(d) => d.clone(),
            None => self.predict_durations(&prompt.text, 1.0)?,
        };
        if durations.len() != prompt.text.len() {
            return Err(MtpError::InvalidInput {
                detail: format!(
                    "{} durations for {} text tokens",
                    durations.len(),
                    prompt.text.len()
                ),
            });
        }
        Ok(Some((
            prompt.text.len(),
            FrameTrack::new(&prompt.text, &durations),
        )))
    }
}

impl LanguageModel for MtpModel {
    type Prompt = TtsPrompt;
    type Cache = MtpCache;

    fn vocab_size(&self) -> usize {
        self.codebook_size() + 1
    }

    fn n_heads(&self) -> usize {
        self.heads.len()
    }

    fn eos_token(&self) -> Option<u32> {
        Some(self.codebook_size() as u32)
    }

    fn prompt_len(&self, prompt: &TtsPrompt) -> usize {
        prompt.text.len() + 1 + prompt.codes.len()
    }

    fn new_cache(&self, batch: usize, capacity: usize) -> Result<MtpCache, InferError> {
        let kv = self
            .transformer
            .new_cache(batch, capacity, &self.device())
            .map_err(infer_err)?;
        Ok(MtpCache {
            kv,
            tracks: vec![None; batch],
        })
    }

    fn prefill(
        &self,
        cache: &mut MtpCache,
        prompts: &[TtsPrompt],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        if !cache.kv.is_empty() {
            return Err(InferError::InvalidRequest {
                detail: "prefill needs an empty cache".into(),
            });
        }
        let rows = prompts
            .iter()
            .map(|p| self.prefix_ids(&p.text, &p.codes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(infer_err)?;
        if prompts.len() != cache.tracks.len() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "{} prompts for a cache of {} sequences",
                    prompts.len(),
                    cache.tracks.len()
                ),
            });
        }
        for (b, p) in prompts.iter().enumerate() {
            cache.tracks[b] = self.prompt_track(p).map_err(infer_err)?;
        }
        let lens: Vec<usize> = rows.iter().map(Vec::len).collect();
        let hidden = self.run_rows(cache, &rows)?;
        self.logits(
            hidden,
            &lens,
            LogitsRequest {
                last_only: true,
                ..request
            },
        )
    }

    fn extend(
        &self,
        cache: &mut MtpCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        check_blocks(blocks, cache.kv.batch_size(), self.vocab_size())?;
        let rows = blocks
            .iter()
            .map(|b| self.code_ids(b))
            .collect::<Result<Vec<_>, _>>()
            .map_err(infer_err)?;
        let lens: Vec<usize> = rows.iter().map(Vec::len).collect();
        let hidden = self.run_rows(cache, &rows)?;
        self.logits(hidden, &lens, request)
    }

    fn cache_len(&self, cache: &MtpCache, b: usize) -> usize {
        cache.kv.lengths().get(b).copied().unwrap_or(0)
    }

    fn truncate(&self, cache: &mut MtpCache, b: usize, len: usize) -> Result<(), InferError> {
        cache.kv.truncate_seq(b, len).map_err(infer_err)
    }
}
