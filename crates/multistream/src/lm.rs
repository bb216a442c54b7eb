//! The multi-stream LM behind `voxspec-infer`'s [`FrameModel`]: every frame decoder (AR,
//! speculative with any acceptance rule) drives it through this adapter.
//!
//! ```text
//! cache:   [voice | text | column 0 … column n−1]      (KV cache of voice + text + n steps)
//! prefill: voice, text and the known leading columns in one forward
//! extend:  k columns in one forward, their step-track ids from the step index
//! truncate(n): the KV cache back to voice + text + n (the track needs no rollback)
//! ```

use voxspec_infer::{FrameLogits, FrameModel, InferError, check_columns};
use voxspec_nn::KvCache;

use crate::align::StepTrack;
use crate::decode::request_track;
use crate::error::{MultiStreamError, Result};
use crate::input::SeqRow;
use crate::model::{MultiStreamConfig, MultiStreamModel};

/// What an utterance is conditioned on: text, voice and (aligned models) its step track.
#[derive(Debug, Clone)]
pub struct MsPrompt {
    /// Text token ids.
    pub text: Vec<u32>,
    /// The global (voice) vector, for a model with `global_dim`.
    pub voice: Option<Vec<f32>>,
    /// Aligned models: the phones of every frame.
    pub track: Option<StepTrack>,
}

impl MsPrompt {
    /// The conditioning of `text` with `voice`; an aligned model's track from `durations` (in
    /// track units) or, when `None`, from its duration predictor.
    ///
    /// # Errors
    /// As [`request_track`].
    pub fn new(
        model: &MultiStreamModel,
        config: &MultiStreamConfig,
        text: &[u32],
        voice: Option<&[f32]>,
        durations: Option<&[u32]>,
    ) -> Result<Self> {
        Ok(Self {
            text: text.to_vec(),
            voice: voice.map(<[f32]>::to_vec),
            track: request_track(model, config, text, durations)?,
        })
    }

    /// Frames the track lays out (aligned models).
    pub fn track_frames(&self) -> Option<usize> {
        self.track.as_ref().map(StepTrack::frames)
    }
}

/// Decoding state of one utterance.
#[derive(Debug)]
pub struct MsCache {
    kv: KvCache,
    /// Voice and text positions before step 0.
    prefix: usize,
    steps: usize,
    track: Option<StepTrack>,
    /// The transformer's output `[1, 1, d_model]` after the last step fed (models with extra
    /// heads; cleared by a truncation).
    last_hidden: Option<burn::tensor::Tensor<3>>,
}

/// A [`MultiStreamModel`] with its config, as a [`FrameModel`].
#[derive(Debug, Clone, Copy)]
pub struct MsFrameLm<'a> {
    /// The network.
    pub model: &'a MultiStreamModel,
    /// Its configuration.
    pub config: &'a MultiStreamConfig,
}

fn infer_err(e: MultiStreamError) -> InferError {
    InferError::Model(e.to_string())
}

impl MsFrameLm<'_> {
    /// Runs `columns` (step-major) at steps `from..` and returns the logits of the positions
    /// `keep_last_only` or all.
    fn run(
        &self,
        cache: &mut MsCache,
        conditioning: Option<&MsPrompt>,
        columns: &[Vec<u32>],
        last_only: bool,
    ) -> Result<FrameLogits> {
        let (k, vocab) = (self.config.streams, self.config.output_vocab());
        let n = columns.len();
        let from = cache.steps;
        // step-major [n][K] → stream-major [K][n]
        let steps: Vec<Vec<u32>> = (0..k)
            .map(|j| columns.iter().map(|c| c[j]).collect())
            .collect();
        let track = match (&cache.track, &self.config.align) {
            (Some(t), Some(a)) => t.steps(from, n, self.config.text_vocab, a),
            _ => Vec::new(),
        };
        let row = SeqRow {
            voice: conditioning.and_then(|c| c.voice.as_deref()),
            text: conditioning.map_or(&[][..], |c| &c.text),
            steps: &steps,
            track: &track,
        };
        let input = self.model.input(self.config, &[row])?;
        let width = input.lens[0];
        let hidden = self.model.hidden_cached(&input, &mut cache.kv)?;
        cache.steps += n;
        if !self.model.ahead.is_empty() {
            cache.last_hidden = Some(hidden.clone().narrow(1, width - 1, 1));
        }
        let (first, count) = if last_only {
            (width - 1, 1)
        } else {
            (width - n, n)
        };
        // [1, width, d] → [1, count, K, V] → [count, K, V]
        let data = self
            .model
            .logits(hidden.narrow(1, first, count))
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| MultiStreamError::Readback(format!("logits: {e:?}")))?;
        FrameLogits::new(data, count, k, vocab)
            .map_err(|e| MultiStreamError::Readback(e.to_string()))
    }
}

impl FrameModel for MsFrameLm<'_> {
    type Prompt = MsPrompt;
    type Cache = MsCache;

    fn streams(&self) -> usize {
        self.config.streams
    }

    fn vocab(&self) -> usize {
        self.config.output_vocab()
    }

    fn delays(&self) -> Vec<usize> {
        (0..self.config.streams)
            .map(|j| self.config.delay * j)
            .collect()
    }

    fn new_cache(
        &self,
        prompt: &MsPrompt,
        capacity_steps: usize,
    ) -> voxspec_infer::Result<MsCache> {
        let prefix = usize::from(prompt.voice.is_some()) + prompt.text.len();
        let kv = self
            .model
            .new_cache(1, prefix + capacity_steps)
            .map_err(infer_err)?;
        Ok(MsCache {
            kv,
            prefix,
            steps: 0,
            track: prompt.track.clone(),
            last_hidden: None,
        })
    }

    fn prefill(
        &self,
        cache: &mut MsCache,
        prompt: &MsPrompt,
        columns: &[Vec<u32>],
    ) -> voxspec_infer::Result<FrameLogits> {
        check_columns(columns, self.streams(), self.vocab())?;
        if cache.steps != 0 || !cache.kv.is_empty() {
            return Err(InferError::InvalidRequest {
                detail: "prefill needs an empty cache".into(),
            });
        }
        self.run(cache, Some(prompt), columns, true)
            .map_err(infer_err)
    }

    fn extend(
        &self,
        cache: &mut MsCache,
        columns: &[Vec<u32>],
    ) -> voxspec_infer::Result<FrameLogits> {
        check_columns(columns, self.streams(), self.vocab())?;
        self.run(cache, None, columns, false).map_err(infer_err)
    }

    fn steps(&self, cache: &MsCache) -> usize {
        cache.steps
    }

    fn truncate(&self, cache: &mut MsCache, steps: usize) -> voxspec_infer::Result<()> {
        if steps > cache.steps {
            return Err(InferError::InvalidRequest {
                detail: format!("truncate to {steps} steps of {}", cache.steps),
            });
        }
        cache.kv.truncate(cache.prefix + steps);
        if steps < cache.steps {
            cache.last_hidden = None;
        }
        cache.steps = steps;
        Ok(())
    }

    fn heads(&self) -> usize {
        1 + self.model.ahead.len()
    }

    fn head_logits(&self, cache: &MsCache, heads: usize) -> voxspec_infer::Result<FrameLogits> {
        if heads == 0 || heads > FrameModel::heads(self) {
            return Err(InferError::InvalidSetting {
                name: "heads",
                value: heads.to_string(),
                expected: format!("1 to the model's {}", FrameModel::heads(self)),
            });
        }
        let hidden = cache
            .last_hidden
            .clone()
            .ok_or_else(|| InferError::InvalidRequest {
                detail: "no step fed since the cache was filled or rolled back".into(),
            })?;
        let (k, vocab) = (self.config.streams, self.config.output_vocab());
        // heads × [1, 1, K, V] → [heads, 1, K, V]
        let mut all = vec![self.model.logits(hidden.clone())];
        all.extend(
            self.model.ahead[..heads - 1]
                .iter()
                .map(|h| h.forward(hidden.clone())),
        );
        let data = burn::tensor::Tensor::cat(all, 0)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| InferError::Model(format!("head logits: {e:?}")))?;
        FrameLogits::new(data, heads, k, vocab)
    }
}
