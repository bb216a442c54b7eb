//! The delayed multi-stream LM (Guo et al. 2024, "SoCodec", §4): a decoder-only transformer over
//! one sequence of a voice vector, text tokens and delayed speech steps, whose `K` speech streams
//! are embedded by one table each and summed per step, with one output head per stream.
//!
//! ```text
//! position:   0 (voice)  | 1 … L (text)   | L+1+s (speech step s = 0 … 1+T+max_delay−1)
//! input:      W_g · g    | E_text[x_i]    | Σ_j E_j[delayed[j][s]]     (+ E_seg[segment])
//! heads:      —          | —              | head j predicts delayed[j][s+1]: a code, EOS, or
//!                                            nothing where the delay pattern holds S
//! ```
//!
//! - Per-stream input tables have `codebook_size + 1` rows: the codes and the delay pattern's
//!   special token `S = codebook_size`. Step 0 holds `S` in every stream and is the BOS (the
//!   paper's extra BOS index); EOS is never an input.
//! - Heads output `codebook_size + 1` classes: the codes and EOS `= codebook_size`. Stream `j`
//!   predicts EOS at the step where its frame `T` would be, `1 + T + delay_j`.
//! - Positions: the transformer's rotary positions over the whole sequence, plus a learned
//!   segment embedding (voice / text / speech) that tells text from speech (the paper uses two
//!   learned position tables instead).
//! - The voice vector (the SoCodec global embedding, `global_dim` = the codec's latent_dim)
//!   is projected to `d_model` and *prepended* as position 0. `global_dim = 0`: no voice.
//!
//! Inference state (the KV cache) lives outside the model: [`MultiStreamModel::new_cache`],
//! [`MultiStreamModel::forward_cached`], and `KvCache::truncate` to roll back.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use voxspec_data::DelayPattern;
use voxspec_nn::linear::linear;
use voxspec_nn::{KvCache, Transformer, TransformerConfig};

use voxspec_mtp::DurationPredictor;

use crate::align::{MsAlignConfig, StepTrackEmbedding};
use crate::error::{MultiStreamError, Result as MsResult};
use crate::input::{MsInput, SeqRow};
use crate::mtp::{MsMtpConfig, MsMtpHead};

/// Configuration of a [`MultiStreamModel`].
#[derive(Config, Debug)]
pub struct MultiStreamConfig {
    /// Text vocabulary size (the tokenizer's, special tokens included).
    pub text_vocab: usize,
    /// Entries of each stream's codebook (SoCodec OPQ: 16384); the special token `S` and EOS
    /// are both `codebook_size` (one as an input, the other as an output class).
    pub codebook_size: usize,
    /// Speech streams `K` modelled (the first `K` streams of the codec).
    pub streams: usize,
    /// Delay step `d`: stream `j` is delayed by `d · j` steps (0: the no-delay ablation).
    #[config(default = 1)]
    pub delay: usize,
    /// Size of the global (voice) vector, 0 for none (SoCodec: its latent_dim, 128).
    #[config(default = 0)]
    pub global_dim: usize,
    /// The decoder-only transformer.
    pub transformer: TransformerConfig,
    /// The step track and duration predictor of an aligned model ([`crate::align`]); `None`:
    /// text and speech only, as in the paper.
    #[config(default = "None")]
    pub align: Option<MsAlignConfig>,
    /// Multi-token prediction heads ([`crate::mtp`]); `None`: the LM's own heads only.
    #[config(default = "None")]
    pub mtp: Option<MsMtpConfig>,
}

impl MultiStreamConfig {
    /// The LM of `preset`'s size ([`tiny`](Self::tiny), [`small`](Self::small),
    /// [`base`](Self::base)).
    pub fn preset(
        preset: voxspec_nn::Preset,
        text_vocab: usize,
        codebook_size: usize,
        streams: usize,
    ) -> Self {
        match preset {
            voxspec_nn::Preset::Tiny => Self::tiny(text_vocab, codebook_size, streams),
            voxspec_nn::Preset::Small => Self::small(text_vocab, codebook_size, streams),
            voxspec_nn::Preset::Base => Self::base(text_vocab, codebook_size, streams),
        }
    }

    /// A tiny model for tests: width 32, 2 layers, no dropout.
    pub fn tiny(text_vocab: usize, codebook_size: usize, streams: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            streams,
            TransformerConfig::tiny().with_dropout(0.0),
        )
    }

    /// The model for the bundled corpus on 2 CPU cores: 4 layers, width 256.
    pub fn small(text_vocab: usize, codebook_size: usize, streams: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            streams,
            TransformerConfig::new()
                .with_d_model(256)
                .with_n_heads(4)
                .with_n_layers(4)
                .with_d_ff(1024)
                .with_max_seq_len(1024)
                .with_dropout(0.1),
        )
    }

    /// The paper's model (SoCodec §5.2: GPT-2 size, 12 layers, width 1024, 16 heads).
    pub fn base(text_vocab: usize, codebook_size: usize, streams: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            streams,
            TransformerConfig::new()
                .with_d_model(1024)
                .with_n_heads(16)
                .with_n_layers(12)
                .with_d_ff(4096)
                .with_max_seq_len(2048)
                .with_dropout(0.1),
        )
    }

    /// The special token `S` of the delay pattern (an input id of every stream).
    pub fn special(&self) -> u32 {
        self.codebook_size as u32
    }

    /// The end-of-speech class of every head.
    pub fn eos(&self) -> u32 {
        self.codebook_size as u32
    }

    /// Output classes of every head: the codes and EOS.
    pub fn output_vocab(&self) -> usize {
        self.codebook_size + 1
    }

    /// The delay pattern: delays `delay · j`, special token [`special`](Self::special).
    ///
    /// # Errors
    /// [`MultiStreamError::Data`] for no streams.
    pub fn pattern(&self) -> MsResult<DelayPattern> {
        Ok(DelayPattern::uniform(
            self.streams,
            self.delay,
            self.special(),
        )?)
    }

    /// Positions of the voice vector (0 or 1).
    pub fn voice_positions(&self) -> usize {
        usize::from(self.global_dim > 0)
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`MultiStreamError::InvalidConfig`] naming the field, or the transformer's own error.
    pub fn validate(&self) -> MsResult<()> {
        for (name, value) in [
            ("text_vocab", self.text_vocab),
            ("codebook_size", self.codebook_size),
            ("streams", self.streams),
        ] {
            if value == 0 {
                return Err(MultiStreamError::InvalidConfig {
                    detail: format!("{name} must be at least 1"),
                });
            }
        }
        if self.codebook_size >= u32::MAX as usize {
            return Err(MultiStreamError::InvalidConfig {
                detail: format!("codebook_size {} is too large", self.codebook_size),
            });
        }
        if !self.transformer.causal {
            return Err(MultiStreamError::InvalidConfig {
                detail: "the LM needs a causal transformer (transformer.causal = true)".into(),
            });
        }
        self.transformer.validate()?;
        if let Some(a) = &self.align {
            a.validate()
                .map_err(|detail| MultiStreamError::InvalidConfig { detail })?;
        }
        if let Some(m) = &self.mtp {
            m.validate()
                .map_err(|detail| MultiStreamError::InvalidConfig { detail })?;
        }
        Ok(())
    }

    /// Prediction heads per position: 1, or `mtp.heads`.
    pub fn n_heads(&self) -> usize {
        self.mtp.as_ref().map_or(1, |m| m.heads)
    }

    /// Track ids per speech position (0 without alignment).
    pub fn track_slots(&self) -> usize {
        self.align.as_ref().map_or(0, MsAlignConfig::slots)
    }

    /// Builds the model with fresh weights on `device`.
    ///
    /// # Errors
    /// When [`validate`](Self::validate) fails.
    pub fn init(&self, device: &Device) -> MsResult<MultiStreamModel> {
        self.validate()?;
        let d = self.transformer.d_model;
        Ok(MultiStreamModel {
            text_embedding: EmbeddingConfig::new(self.text_vocab, d).init(device),
            stream_embeddings: (0..self.streams)
                .map(|_| EmbeddingConfig::new(self.codebook_size + 1, d).init(device))
                .collect(),
            segment_embedding: EmbeddingConfig::new(3, d).init(device),
            voice_projection: (self.global_dim > 0)
                .then(|| LinearConfig::new(self.global_dim, d).init(device)),
            track: self
                .align
                .as_ref()
                .map(|a| StepTrackEmbedding::init(a, self.text_vocab, d, device)),
            duration: match &self.align {
                Some(a) => Some(
                    DurationPredictor::init(
                        self.text_vocab,
                        d,
                        self.transformer.n_heads,
                        a.duration_layers,
                        self.transformer.dropout,
                        self.transformer.max_seq_len,
                        device,
                    )
                    .map_err(|e| MultiStreamError::InvalidConfig {
                        detail: format!("duration predictor: {e}"),
                    })?,
                ),
                None => None,
            },
            transformer: self.transformer.init(device)?,
            heads: (0..self.streams)
                .map(|_| LinearConfig::new(d, self.output_vocab()).init(device))
                .collect(),
            ahead: (1..self.n_heads())
                .map(|_| MsMtpHead::init(d, self.streams, self.output_vocab(), device))
                .collect(),
        })
    }
}

/// The multi-stream LM: embeddings → causal transformer → one head per stream.
#[derive(Module, Debug)]
pub struct MultiStreamModel {
    /// Text ids → `d_model`.
    pub text_embedding: Embedding,
    /// Per stream: codes and `S` (`codebook_size + 1` rows) → `d_model`; summed over streams.
    pub stream_embeddings: Vec<Embedding>,
    /// Voice / text / speech → `d_model`, added at every position.
    pub segment_embedding: Embedding,
    /// `global_dim → d_model` (absent without a voice vector).
    pub voice_projection: Option<Linear>,
    /// Phones of the coming frames at every speech step (aligned models).
    pub track: Option<StepTrackEmbedding>,
    /// Phone durations in track units (aligned models).
    pub duration: Option<DurationPredictor>,
    /// The decoder-only stack.
    pub transformer: Transformer,
    /// Per stream: `d_model → codebook_size + 1` (codes and EOS).
    pub heads: Vec<Linear>,
    /// Multi-token prediction: head `i + 1` predicts the column `i + 2` steps ahead (empty
    /// without `mtp`).
    pub ahead: Vec<MsMtpHead>,
}

impl MultiStreamModel {
    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.segment_embedding.weight.val().device()
    }

    /// Number of speech streams.
    pub fn streams(&self) -> usize {
        self.heads.len()
    }

    /// Uploads `rows` as an input of this model (shortcut for [`MsInput::build`]).
    ///
    /// # Errors
    /// As [`MsInput::build`].
    pub fn input(&self, config: &MultiStreamConfig, rows: &[SeqRow<'_>]) -> MsResult<MsInput> {
        MsInput::build(config, rows, &self.device())
    }

    /// Input embeddings.
    ///
    /// # Shapes
    /// - `input`: `[batch, time]` positions (see [`MsInput`])
    /// - output: `[batch, time, d_model]`
    ///
    /// # Errors
    /// [`MultiStreamError::InvalidInput`] when the input's streams or voice do not match the
    /// model.
    pub fn embed(&self, input: &MsInput) -> MsResult<Tensor<3>> {
        let [batch, k, time] = input.speech.dims();
        if k != self.streams() {
            return Err(MultiStreamError::InvalidInput {
                detail: format!("{k} speech streams for a model of {}", self.streams()),
            });
        }
        let mut x = self.text_embedding.forward(input.text.clone()) * input.text_mask.clone()
            + self.segment_embedding.forward(input.segment.clone());
        for (j, table) in self.stream_embeddings.iter().enumerate() {
            // [batch, 1, time] → [batch, time]
            let ids = input.speech.clone().narrow(1, j, 1).reshape([batch, time]);
            x = x + table.forward(ids) * input.speech_mask.clone();
        }
        match (&self.track, &input.track) {
            (Some(track), Some(ids)) => x = x + track.forward(ids.clone()),
            (None, None) => {}
            (Some(_), None) => {
                return Err(MultiStreamError::InvalidInput {
                    detail: "an aligned model needs the step track of its input".into(),
                });
            }
            (None, Some(_)) => {
                return Err(MultiStreamError::InvalidInput {
                    detail: "a step track for a model without alignment".into(),
                });
            }
        }
        match (&self.voice_projection, &input.voice) {
            (_, None) => Ok(x),
            (Some(proj), Some((voice, at))) => {
                // [batch, global_dim] → [batch, 1, d_model], placed where `at` is 1
                let v = proj.forward(voice.clone()).unsqueeze_dim::<3>(1);
                Ok(x + v * at.clone())
            }
            (None, Some(_)) => Err(MultiStreamError::InvalidInput {
                detail: "a voice vector for a model without global_dim".into(),
            }),
        }
    }

    /// Logits of every head from hidden states.
    ///
    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `[batch, time, streams, codebook_size + 1]`
    pub fn logits(&self, hidden: Tensor<3>) -> Tensor<4> {
        Tensor::stack(
            self.heads
                .iter()
                .map(|h| linear(h, hidden.clone()))
                .collect(),
            2,
        )
    }

    /// Logits of the extra heads `1..n` from hidden states (empty without `mtp`).
    ///
    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `n − 1` tensors `[batch, time, streams, codebook_size + 1]`, head 1 first
    pub fn ahead_logits(&self, hidden: Tensor<3>) -> Vec<Tensor<4>> {
        self.ahead
            .iter()
            .map(|h| h.forward(hidden.clone()))
            .collect()
    }

    /// The transformer's output over whole (padded) rows.
    ///
    /// # Shapes
    /// - `input`: `[batch, time]` positions, right-padded (see [`MsInput`])
    /// - output: `[batch, time, d_model]`
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn hidden(&self, input: &MsInput) -> MsResult<Tensor<3>> {
        let x = self.embed(input)?;
        Ok(self.transformer.forward(x, Some(input.mask.clone()))?)
    }

    /// Full forward over whole (padded) rows: training and scoring.
    ///
    /// # Shapes
    /// - `input`: `[batch, time]` positions, right-padded (see [`MsInput`])
    /// - output: `[batch, time, streams, codebook_size + 1]`; the logits at a speech step are
    ///   the prediction of the next step; outputs at padding are unspecified
    ///
    /// # Errors
    /// As [`embed`](Self::embed); [`MultiStreamError::Nn`] past `max_seq_len`.
    pub fn forward(&self, input: &MsInput) -> MsResult<Tensor<4>> {
        Ok(self.logits(self.hidden(input)?))
    }

    /// An empty KV cache for `batch` sequences of up to `capacity` positions.
    ///
    /// # Errors
    /// [`MultiStreamError::Nn`] when `capacity > max_seq_len`.
    pub fn new_cache(&self, batch: usize, capacity: usize) -> MsResult<KvCache> {
        Ok(self
            .transformer
            .new_cache(batch, capacity, &self.device())?)
    }

    /// Incremental forward: row `b` of `input` continues sequence `b` of `cache` (a prompt to
    /// prefill, one new speech step for plain decoding, `k` steps to verify a speculation; rows
    /// may differ in length). Equal to the matching positions of [`forward`](Self::forward)
    /// over the whole sequence. Roll back with `cache.truncate(len)` /
    /// `cache.truncate_seq(b, len)`.
    ///
    /// # Shapes
    /// - `input`: `[batch, width]` positions, `batch` the cache's
    /// - output: `[batch, width, streams, codebook_size + 1]`; past row `b`'s length,
    ///   unspecified
    ///
    /// # Errors
    /// As [`embed`](Self::embed); [`MultiStreamError::Nn`] when the cache overflows or its
    /// batch differs (the cache is then unchanged).
    pub fn forward_cached(&self, input: &MsInput, cache: &mut KvCache) -> MsResult<Tensor<4>> {
        Ok(self.logits(self.hidden_cached(input, cache)?))
    }

    /// [`forward_cached`](Self::forward_cached) up to the transformer's output (for the extra
    /// heads).
    ///
    /// # Shapes
    /// - `input`: `[batch, width]` positions, `batch` the cache's
    /// - output: `[batch, width, d_model]`
    ///
    /// # Errors
    /// As [`forward_cached`](Self::forward_cached).
    pub fn hidden_cached(&self, input: &MsInput, cache: &mut KvCache) -> MsResult<Tensor<3>> {
        let x = self.embed(input)?;
        Ok(self
            .transformer
            .forward_cached_ragged(x, &input.lens, cache)?)
    }
}
