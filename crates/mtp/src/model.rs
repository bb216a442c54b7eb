//! The AR model with multi-token-prediction heads (Nguyen et al. 2025, "Accelerating
//! Codec-based Speech Synthesis with Multi-Token Prediction and Speculative Decoding", §III-A/B),
//! VALL-E/USLM style: text tokens, a separator and stream-0 codec codes form one sequence for a
//! decoder-only transformer; `n_heads` heads read the hidden state at position `t`, head `i`
//! predicting the code `i + 1` steps ahead.
//!
//! ```text
//! input ids:   [ text_0 … text_{L-1} | SEP | c_0 c_1 … c_{T-1} ]         one embedding table:
//!              [ 0 .. text_vocab     | tv  | tv + 1 + c         ]         text, SEP, codes
//! head 0 at t: predicts input t + 1 (the next code; EOS after c_{T-1})
//! head i at t: predicts input t + 1 + i                      (Medusa head: x + SiLU(W x), then W_out)
//! outputs:     codebook_size + 1 classes: the codes and EOS = codebook_size
//! ```
//!
//! Head 0 is a plain linear layer; heads `i ≥ 1` put a residual block with a zero-initialised
//! weight before their own output layer (Medusa, Cai et al. 2024), so every head starts equal to
//! a linear read-out of the same hidden state.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_nn::activation::silu;
use voxspec_nn::linear::linear;
use voxspec_nn::{Transformer, TransformerConfig};

use crate::duration::DurationPredictor;
use crate::error::{MtpError, Result as MtpResult};
use crate::track::{AlignConfig, PhoneTrack, TrackLayout};

/// Configuration of an [`MtpModel`].
#[derive(Config, Debug)]
pub struct MtpConfig {
    /// Text vocabulary size (the tokenizer's, special tokens included).
    pub text_vocab: usize,
    /// Entries of the stream-0 codebook; EOS is the extra class `codebook_size`.
    pub codebook_size: usize,
    /// Prediction heads: head 0 predicts the next code, head `i` the code `i` steps after it.
    #[config(default = 8)]
    pub n_heads: usize,
    /// The decoder-only transformer.
    pub transformer: TransformerConfig,
    /// Phone track and duration predictor (an aligned model: the text is phones and every code
    /// step sees the phones of the frames ahead; see [`crate::track`]). `None`: plain VALL-E
    /// style model that must learn the alignment by attention.
    #[config(default = "None")]
    pub alignment: Option<AlignConfig>,
}

impl MtpConfig {
    /// A tiny model for tests.
    pub fn tiny(text_vocab: usize, codebook_size: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            TransformerConfig::tiny().with_dropout(0.0),
        )
        .with_n_heads(4)
    }

    /// The model trained on the bundled corpus on 2 CPU cores: 4 layers, width 256.
    pub fn small(text_vocab: usize, codebook_size: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            TransformerConfig::new()
                .with_d_model(256)
                .with_n_heads(4)
                .with_n_layers(4)
                .with_d_ff(1024)
                .with_max_seq_len(1024)
                .with_dropout(0.1),
        )
    }

    /// The paper-scale model (VALL-E-sized AR stage: 12 layers, width 1024, 16 heads) for
    /// LibriTTS on a GPU.
    pub fn base(text_vocab: usize, codebook_size: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            TransformerConfig::new()
                .with_d_model(1024)
                .with_n_heads(16)
                .with_n_layers(12)
                .with_d_ff(4096)
                .with_max_seq_len(2048)
                .with_dropout(0.1),
        )
    }

    /// The separator between text and codes, as an input id.
    pub fn sep_id(&self) -> u32 {
        self.text_vocab as u32
    }

    /// Input id of code `code` (or of EOS, `codebook_size`).
    pub fn code_id(&self, code: u32) -> u32 {
        self.text_vocab as u32 + 1 + code
    }

    /// Size of the input embedding table: text, SEP, codes.
    pub fn input_vocab(&self) -> usize {
        self.text_vocab + 1 + self.codebook_size
    }

    /// Output classes of every head: the codes and EOS.
    pub fn output_vocab(&self) -> usize {
        self.codebook_size + 1
    }

    /// The end-of-speech class.
    pub fn eos(&self) -> u32 {
        self.codebook_size as u32
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`MtpError::InvalidConfig`] naming the field, or the transformer's own error.
    pub fn validate(&self) -> MtpResult<()> {
        for (name, value) in [
            ("text_vocab", self.text_vocab),
            ("codebook_size", self.codebook_size),
            ("n_heads", self.n_heads),
        ] {
            if value == 0 {
                return Err(MtpError::InvalidConfig {
                    detail: format!("{name} must be at least 1"),
                });
            }
        }
        if !self.transformer.causal {
            return Err(MtpError::InvalidConfig {
                detail: "the AR model needs a causal transformer (transformer.causal = true)"
                    .into(),
            });
        }
        self.transformer.validate()?;
        if let Some(a) = &self.alignment {
            if a.lookahead == 0 || a.progress == 0 || a.duration_layers == 0 {
                return Err(MtpError::InvalidConfig {
                    detail: format!(
                        "alignment.lookahead, progress and duration_layers must be at least 1: \
                         {a:?}"
                    ),
                });
            }
            if !(a.duration_weight.is_finite() && a.duration_weight >= 0.0) {
                return Err(MtpError::InvalidConfig {
                    detail: format!(
                        "alignment.duration_weight must be finite and ≥ 0, got {}",
                        a.duration_weight
                    ),
                });
            }
        }
        Ok(())
    }

    /// The track layout of an aligned model.
    pub fn track_layout(&self) -> Option<TrackLayout> {
        self.alignment
            .as_ref()
            .map(|a| TrackLayout::new(self.text_vocab, a))
    }

    /// Builds the model with fresh weights on `device`.
    ///
    /// # Errors
    /// When [`validate`](Self::validate) fails.
    pub fn init(&self, device: &Device) -> MtpResult<MtpModel> {
        self.validate()?;
        let d = self.transformer.d_model;
        let heads = (0..self.n_heads)
            .map(|i| MtpHead {
                residual: (i > 0).then(|| {
                    let mut lin = LinearConfig::new(d, d).init(device);
                    // Medusa: the residual branch starts at zero, so x + SiLU(0·x + 0) = x.
                    lin.weight = Param::from_tensor(Tensor::zeros([d, d], device));
                    lin
                }),
                out: LinearConfig::new(d, self.output_vocab()).init(device),
            })
            .collect();
        let (track, duration) = match &self.alignment {
            Some(a) => {
                let layout = TrackLayout::new(self.text_vocab, a);
                let t = &self.transformer;
                let duration = DurationPredictor::init(
                    self.text_vocab,
                    d,
                    t.n_heads,
                    a.duration_layers,
                    t.dropout,
                    t.max_seq_len,
                    device,
                )?;
                (Some(PhoneTrack::init(&layout, d, device)), Some(duration))
            }
            None => (None, None),
        };
        Ok(MtpModel {
            embedding: EmbeddingConfig::new(self.input_vocab(), d).init(device),
            transformer: self.transformer.init(device)?,
            heads,
            track,
            duration,
            text_vocab: self.text_vocab,
            codebook_size: self.codebook_size,
        })
    }
}

/// One prediction head: `out(x + SiLU(residual(x)))`, or `out(x)` for head 0.
#[derive(Module, Debug)]
pub struct MtpHead {
    /// `d_model → d_model`, zero-initialised; absent on head 0.
    pub residual: Option<Linear>,
    /// `d_model → codebook_size + 1`.
    pub out: Linear,
}

impl MtpHead {
    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `[batch, time, codebook_size + 1]`
    pub fn forward(&self, hidden: Tensor<3>) -> Tensor<3> {
        let x = match &self.residual {
            Some(res) => hidden.clone() + silu(linear(res, hidden)),
            None => hidden,
        };
        linear(&self.out, x)
    }
}

/// The AR model: embedding → causal transformer → heads. Inference state (the KV cache) lives
/// outside, in [`crate::MtpCache`].
#[derive(Module, Debug)]
pub struct MtpModel {
    /// Input ids (text, SEP, codes) → `d_model`.
    pub embedding: Embedding,
    /// The decoder-only stack.
    pub transformer: Transformer,
    /// Head `i` predicts the code `i + 1` positions ahead.
    pub heads: Vec<MtpHead>,
    /// Phone-track embedding of an aligned model (added to every position's input).
    pub track: Option<PhoneTrack>,
    /// Duration predictor of an aligned model.
    pub duration: Option<DurationPredictor>,
    text_vocab: usize,
    codebook_size: usize,
}

impl MtpModel {
    /// A model from existing parts (e.g. a draft assembled from a target's layers; an aligned
    /// target's track and duration predictor go with it).
    ///
    /// # Errors
    /// [`MtpError::InvalidConfig`] when there is no head or the parts disagree on widths.
    pub fn from_parts(
        embedding: Embedding,
        transformer: Transformer,
        heads: Vec<MtpHead>,
        alignment: Option<(PhoneTrack, DurationPredictor)>,
        text_vocab: usize,
        codebook_size: usize,
    ) -> MtpResult<Self> {
        let [rows, d] = embedding.weight.val().dims();
        let bad = |detail: String| Err(MtpError::InvalidConfig { detail });
        if heads.is_empty() {
            return bad("a model needs at least one head".into());
        }
        if rows != text_vocab + 1 + codebook_size {
            return bad(format!(
                "embedding has {rows} rows; text_vocab {text_vocab} + 1 + codebook_size \
                 {codebook_size} expected"
            ));
        }
        if d != transformer.d_model() {
            return bad(format!(
                "embedding width {d} differs from the transformer's d_model {}",
                transformer.d_model()
            ));
        }
        let (track, duration) = match alignment {
            Some((t, d)) => (Some(t), Some(d)),
            None => (None, None),
        };
        Ok(Self {
            embedding,
            transformer,
            heads,
            track,
            duration,
            text_vocab,
            codebook_size,
        })
    }

    /// Whether the model is aligned (reads a phone track; needs durations).
    pub fn is_aligned(&self) -> bool {
        self.track.is_some()
    }

    /// Frames per text token predicted by an aligned model's duration predictor (`pace` > 1
    /// speaks slower).
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] for a model without one, empty text or a bad pace.
    pub fn predict_durations(&self, text: &[u32], pace: f32) -> MtpResult<Vec<u32>> {
        match &self.duration {
            Some(d) => d.predict(text, pace),
            None => Err(MtpError::InvalidInput {
                detail: "this AR model has no duration predictor (it was not trained aligned)"
                    .into(),
            }),
        }
    }

    /// Number of prediction heads.
    pub fn n_heads(&self) -> usize {
        self.heads.len()
    }

    /// Text vocabulary size.
    pub fn text_vocab(&self) -> usize {
        self.text_vocab
    }

    /// Stream-0 codebook size.
    pub fn codebook_size(&self) -> usize {
        self.codebook_size
    }

    /// The input embeddings of the output tokens, as PCG's similarity groups need them:
    /// `[codebook_size + 1, d_model]` row-major, code `c` in row `c` and a zero row for
    /// end-of-speech (never an input, so it has no embedding and groups with nothing). Returns
    /// `(table, rows, d_model)`.
    ///
    /// # Errors
    /// [`MtpError::Readback`] when the weights cannot be read.
    pub fn code_embeddings(&self) -> MtpResult<(Vec<f32>, usize, usize)> {
        let weight = self.embedding.weight.val();
        let [_, d] = weight.dims();
        // Input ids: text, SEP, then the codes.
        let codes = weight.narrow(0, self.text_vocab + 1, self.codebook_size);
        let eos = Tensor::<2>::zeros([1, d], &codes.device());
        let table = Tensor::cat(vec![codes, eos], 0)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| MtpError::Readback(format!("the embedding table: {e:?}")))?;
        Ok((table, self.codebook_size + 1, d))
    }

    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.embedding.weight.val().device()
    }

    /// Input ids of one sequence's prefix: `text`, SEP, then `codes`.
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] for empty text; [`MtpError::TokenOutOfRange`] for a text token
    /// ≥ `text_vocab` or a code ≥ `codebook_size`.
    pub fn prefix_ids(&self, text: &[u32], codes: &[u32]) -> MtpResult<Vec<u32>> {
        if text.is_empty() {
            return Err(MtpError::InvalidInput {
                detail: "the text has no tokens".into(),
            });
        }
        let mut ids = Vec::with_capacity(text.len() + 1 + codes.len());
        for &t in text {
            if t as usize >= self.text_vocab {
                return Err(MtpError::TokenOutOfRange {
                    what: "text",
                    token: t,
                    vocab: self.text_vocab,
                });
            }
            ids.push(t);
        }
        ids.push(self.text_vocab as u32);
        ids.extend(self.code_ids(codes)?);
        Ok(ids)
    }

    /// Input ids of codes.
    ///
    /// # Errors
    /// [`MtpError::TokenOutOfRange`] for a code ≥ `codebook_size` (EOS is never an input).
    pub fn code_ids(&self, codes: &[u32]) -> MtpResult<Vec<u32>> {
        codes
            .iter()
            .map(|&c| {
                if c as usize >= self.codebook_size {
                    Err(MtpError::TokenOutOfRange {
                        what: "code",
                        token: c,
                        vocab: self.codebook_size,
                    })
                } else {
                    Ok(self.text_vocab as u32 + 1 + c)
                }
            })
            .collect()
    }

    /// Embeds a batch of equally long id rows (and their track ids for an aligned model).
    ///
    /// # Shapes
    /// - `ids`: `batch` rows of `time` ids each
    /// - `track`: `batch · time · slots` ids, row-major, for an aligned model
    /// - output: `[batch, time, d_model]`
    pub(crate) fn embed_rows(
        &self,
        ids: &[Vec<u32>],
        time: usize,
        track: Option<Vec<u32>>,
    ) -> MtpResult<Tensor<3>> {
        let flat: Vec<i64> = ids
            .iter()
            .flat_map(|row| row.iter().map(|&id| i64::from(id)))
            .collect();
        let batch = ids.len();
        let device = self.device();
        let ids = Tensor::<2, Int>::from_data(TensorData::new(flat, [batch, time]), &device);
        let track = track.map(|t| {
            let slots = t.len() / (batch * time).max(1);
            let t: Vec<i64> = t.into_iter().map(i64::from).collect();
            Tensor::<3, Int>::from_data(TensorData::new(t, [batch, time, slots]), &device)
        });
        self.embed(ids, track)
    }

    /// Input embeddings: the ids' embedding plus, for an aligned model, the phone track.
    ///
    /// # Shapes
    /// - `ids`: `[batch, time]`
    /// - `track`: `[batch, time, slots]` track ids (see [`crate::track`]); required by an
    ///   aligned model, refused by a plain one
    /// - output: `[batch, time, d_model]`
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] when the track is missing, unexpected or of the wrong shape.
    pub fn embed(
        &self,
        ids: Tensor<2, Int>,
        track: Option<Tensor<3, Int>>,
    ) -> MtpResult<Tensor<3>> {
        let [batch, time] = ids.dims();
        let x = self.embedding.forward(ids);
        match (&self.track, track) {
            (None, None) => Ok(x),
            (Some(t), Some(ids)) => {
                let dims = ids.dims();
                if dims != [batch, time, t.slots()] {
                    return Err(MtpError::InvalidInput {
                        detail: format!(
                            "track ids of shape {dims:?}; [{batch}, {time}, {}] expected",
                            t.slots()
                        ),
                    });
                }
                Ok(x + t.forward(ids))
            }
            (Some(_), None) => Err(MtpError::InvalidInput {
                detail: "an aligned AR model needs the phone track (durations)".into(),
            }),
            (None, Some(_)) => Err(MtpError::InvalidInput {
                detail: "this AR model is not aligned; it takes no phone track".into(),
            }),
        }
    }

    /// Hidden states of whole sequences (training, scoring).
    ///
    /// # Shapes
    /// - `ids`: `[batch, time]` input ids (right-padded; outputs at padding are unspecified)
    /// - `track`: `[batch, time, slots]` for an aligned model, else `None`
    /// - output: `[batch, time, d_model]`
    ///
    /// # Errors
    /// [`MtpError::Nn`] when the sequence exceeds `max_seq_len`; as [`embed`](Self::embed).
    pub fn hidden(
        &self,
        ids: Tensor<2, Int>,
        track: Option<Tensor<3, Int>>,
    ) -> MtpResult<Tensor<3>> {
        let x = self.embed(ids, track)?;
        Ok(self.transformer.forward(x, None)?)
    }

    /// Logits of the first `heads` heads.
    ///
    /// # Shapes
    /// - `hidden`: `[batch, time, d_model]`
    /// - output: `heads` tensors `[batch, time, codebook_size + 1]`, head 0 first
    pub fn head_logits(&self, hidden: Tensor<3>, heads: usize) -> Vec<Tensor<3>> {
        self.heads
            .iter()
            .take(heads)
            .map(|h| h.forward(hidden.clone()))
            .collect()
    }

    /// Full forward: logits of every head at every position.
    ///
    /// # Shapes
    /// - `ids`: `[batch, time]` input ids
    /// - `track`: `[batch, time, slots]` for an aligned model, else `None`
    /// - output: `n_heads` tensors `[batch, time, codebook_size + 1]`
    ///
    /// # Errors
    /// As [`hidden`](Self::hidden).
    pub fn forward(
        &self,
        ids: Tensor<2, Int>,
        track: Option<Tensor<3, Int>>,
    ) -> MtpResult<Vec<Tensor<3>>> {
        let hidden = self.hidden(ids, track)?;
        Ok(self.head_logits(hidden, self.heads.len()))
    }
}
