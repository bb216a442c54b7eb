//! The NAR model, VALL-E style (Wang et al. 2023, "Neural Codec Language Models are Zero-Shot
//! Text to Speech Synthesizers", §4.2.2): a bidirectional transformer that fills RVQ layer `j`
//! (`j ≥ 1`, 0-based) of every target frame at once, given the text, the acoustic prompt (all
//! layers) and the layers `< j` of the target.
//!
//! ```text
//! positions:  text_0 … text_{L-1} | SEP | prompt frames            | target frames
//! input:      E_text(text)        | s   | Σ_{l < n_q} E_l(prompt_l) | Σ_{l < j} E_l(target_l)
//!             + E_stage(j) at every position
//! output:     head_j at the target frames → codes of layer j            (n_q − 1 heads)
//! ```
//!
//! An *aligned* NAR (config `track`) also adds, at every frame, the embedding of the phone that
//! frame speaks and how far into the phone it is (a [`crate::track`] phone track with
//! lookahead 1, from the same durations as the aligned AR model's). A small NAR trained on an
//! hour of speech does not learn to align frames with the text by attention, and without the
//! track it renders little more than what RVQ-1 alone carries.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use voxspec_nn::linear::linear;
use voxspec_nn::{Transformer, TransformerConfig};

use crate::error::{MtpError, Result as MtpResult};
use crate::track::{AlignConfig, FrameTrack, PhoneTrack, TrackLayout};

/// The phone track of an aligned NAR model.
#[derive(Config, Debug, PartialEq)]
pub struct NarTrackConfig {
    /// Frames ahead whose phone each frame sees (1: its own).
    #[config(default = 1)]
    pub lookahead: usize,
    /// Buckets of "frames since the current phone began" (the last holds all longer).
    #[config(default = 16)]
    pub progress: usize,
}

/// Configuration of a [`NarModel`].
#[derive(Config, Debug)]
pub struct NarConfig {
    /// Text vocabulary size.
    pub text_vocab: usize,
    /// Entries of every codebook.
    pub codebook_size: usize,
    /// RVQ layers of the codec; the model predicts layers `1..n_q`.
    pub n_q: usize,
    /// The bidirectional transformer (`causal` must be false).
    pub transformer: TransformerConfig,
    /// Phone track (an aligned NAR: the text is phones and every frame sees the phone it
    /// speaks). `None`: the frames find the text by attention alone.
    #[config(default = "None")]
    pub track: Option<NarTrackConfig>,
}

impl NarConfig {
    /// A tiny model for tests.
    pub fn tiny(text_vocab: usize, codebook_size: usize, n_q: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            n_q,
            TransformerConfig::tiny()
                .with_causal(false)
                .with_dropout(0.0),
        )
    }

    /// The model trained on the bundled corpus on 2 CPU cores.
    pub fn small(text_vocab: usize, codebook_size: usize, n_q: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            n_q,
            TransformerConfig::new()
                .with_d_model(256)
                .with_n_heads(4)
                .with_n_layers(4)
                .with_d_ff(1024)
                .with_max_seq_len(1024)
                .with_causal(false)
                .with_dropout(0.1),
        )
    }

    /// The paper-scale model (12 layers, width 1024) for LibriTTS on a GPU.
    pub fn base(text_vocab: usize, codebook_size: usize, n_q: usize) -> Self {
        Self::new(
            text_vocab,
            codebook_size,
            n_q,
            TransformerConfig::new()
                .with_d_model(1024)
                .with_n_heads(16)
                .with_n_layers(12)
                .with_d_ff(4096)
                .with_max_seq_len(2048)
                .with_causal(false)
                .with_dropout(0.1),
        )
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`MtpError::InvalidConfig`] naming the field, or the transformer's own error.
    pub fn validate(&self) -> MtpResult<()> {
        let bad = |detail: String| Err(MtpError::InvalidConfig { detail });
        if self.text_vocab == 0 || self.codebook_size == 0 {
            return bad("text_vocab and codebook_size must be at least 1".into());
        }
        if self.n_q < 2 {
            return bad(format!(
                "n_q = {}: a NAR stage needs at least 2 RVQ layers",
                self.n_q
            ));
        }
        if self.transformer.causal {
            return bad("the NAR model needs a bidirectional transformer (causal = false)".into());
        }
        if let Some(t) = &self.track
            && (t.lookahead == 0 || t.progress == 0)
        {
            return bad("track.lookahead and track.progress must be at least 1".into());
        }
        self.transformer.validate()?;
        Ok(())
    }

    /// The track layout of an aligned NAR model.
    pub fn track_layout(&self) -> Option<TrackLayout> {
        self.track.as_ref().map(|t| {
            TrackLayout::new(
                self.text_vocab,
                &AlignConfig::new()
                    .with_lookahead(t.lookahead)
                    .with_progress(t.progress),
            )
        })
    }

    /// Builds the model with fresh weights on `device`.
    ///
    /// # Errors
    /// When [`validate`](Self::validate) fails.
    pub fn init(&self, device: &Device) -> MtpResult<NarModel> {
        self.validate()?;
        let d = self.transformer.d_model;
        Ok(NarModel {
            track: self
                .track_layout()
                .map(|layout| PhoneTrack::init(&layout, d, device)),
            text_embedding: EmbeddingConfig::new(self.text_vocab, d).init(device),
            code_embeddings: (0..self.n_q)
                .map(|_| EmbeddingConfig::new(self.codebook_size, d).init(device))
                .collect(),
            stage_embedding: EmbeddingConfig::new(self.n_q, d).init(device),
            sep: Param::from_tensor(Tensor::zeros([1, 1, d], device)),
            transformer: self.transformer.init(device)?,
            heads: (1..self.n_q)
                .map(|_| LinearConfig::new(d, self.codebook_size).init(device))
                .collect(),
            codebook_size: self.codebook_size,
        })
    }
}

/// The NAR model.
#[derive(Module, Debug)]
pub struct NarModel {
    /// Text tokens → `d_model`.
    pub text_embedding: Embedding,
    /// One table per RVQ layer; a frame's input is the sum over its known layers.
    pub code_embeddings: Vec<Embedding>,
    /// Which layer is being predicted, added at every position.
    pub stage_embedding: Embedding,
    /// The separator vector between text and frames, `[1, 1, d_model]`.
    pub sep: Param<Tensor<3>>,
    /// The bidirectional stack.
    pub transformer: Transformer,
    /// `heads[j - 1]` predicts layer `j`.
    pub heads: Vec<Linear>,
    /// Phone-track embedding of an aligned model (added to every frame's input).
    pub track: Option<PhoneTrack>,
    codebook_size: usize,
}

/// One item for [`NarModel::inputs`].
#[derive(Debug, Clone, Copy)]
pub struct NarItem<'a> {
    /// Text tokens.
    pub text: &'a [u32],
    /// Codes `[n_q][frames]`, prompt frames first.
    pub codes: &'a [Vec<u32>],
    /// Frames of `codes` that belong to the prompt (all layers known).
    pub prompt: usize,
    /// Track ids of every frame (prompt then target), `frames · slots` row-major
    /// ([`FrameTrack::ids`]), for an aligned model; `None` tells its frames nothing.
    pub track: Option<&'a [u32]>,
}

impl<'a> NarItem<'a> {
    /// An item without a phone track.
    pub fn new(text: &'a [u32], codes: &'a [Vec<u32>], prompt: usize) -> Self {
        Self {
            text,
            codes,
            prompt,
            track: None,
        }
    }
}

/// One NAR input batch (right-padded), built by [`NarModel::inputs`].
#[derive(Debug, Clone)]
pub struct NarInput {
    /// Text tokens `[batch, text_len]`.
    pub text: Tensor<2, Int>,
    /// Codes of every layer for every frame (prompt then target), `[batch, n_q, frames]`;
    /// entries of layers not yet known are ignored.
    pub codes: Tensor<3, Int>,
    /// Track ids `[batch, frames, slots]` of an aligned model (padding and untold frames NONE).
    pub track: Option<Tensor<3, Int>>,
    /// Frames per item that belong to the prompt (all layers known).
    pub prompt_frames: Vec<usize>,
    /// Real text length per item.
    pub text_lengths: Vec<usize>,
    /// Real frame count (prompt + target) per item.
    pub frame_lengths: Vec<usize>,
}

impl NarModel {
    /// RVQ layers.
    pub fn n_q(&self) -> usize {
        self.code_embeddings.len()
    }

    /// The track layout of an aligned model.
    pub fn track_layout(&self) -> Option<TrackLayout> {
        self.track.as_ref().map(PhoneTrack::layout)
    }

    /// Entries per codebook.
    pub fn codebook_size(&self) -> usize {
        self.codebook_size
    }

    /// The device the weights live on.
    pub fn device(&self) -> Device {
        self.sep.val().device()
    }

    /// Builds an input batch from per-item text, codes `[n_q][frames]` (prompt frames first)
    /// and prompt lengths.
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] for empty text, ragged layers, a prompt longer than the item,
    /// or a token outside its vocabulary.
    pub fn inputs(&self, items: &[NarItem<'_>]) -> MtpResult<NarInput> {
        let n_q = self.n_q();
        let bad = |detail: String| Err(MtpError::InvalidInput { detail });
        let lt = items.iter().map(|i| i.text.len()).max().unwrap_or(0).max(1);
        let lf = items
            .iter()
            .map(|i| i.codes.first().map_or(0, Vec::len))
            .max()
            .unwrap_or(0)
            .max(1);
        let layout = self.track.as_ref().map(PhoneTrack::layout);
        let slots = layout.map_or(0, |l| l.slots());
        let mut track = layout.map(|l| vec![i64::from(l.none_id()); items.len() * lf * slots]);
        let mut text = vec![0i64; items.len() * lt];
        let mut codes = vec![0i64; items.len() * n_q * lf];
        for (b, item) in items.iter().enumerate() {
            let (t, c, prompt) = (item.text, item.codes, item.prompt);
            if t.is_empty() {
                return bad(format!("item {b} has no text tokens"));
            }
            if c.len() != n_q {
                return bad(format!(
                    "item {b} has {} code layers, expected {n_q}",
                    c.len()
                ));
            }
            let frames = c[0].len();
            if c.iter().any(|l| l.len() != frames) || prompt > frames {
                return bad(format!(
                    "item {b}: layers of {:?} frames with a prompt of {prompt}",
                    c.iter().map(Vec::len).collect::<Vec<_>>()
                ));
            }
            match (item.track, &mut track, layout) {
                (None, _, _) => {}
                (Some(ids), Some(out), Some(l)) => {
                    if ids.len() != frames * slots {
                        return bad(format!(
                            "item {b}: {} track ids for {frames} frames of {slots} slots",
                            ids.len()
                        ));
                    }
                    if let Some(&id) = ids.iter().find(|&&id| id as usize >= l.rows()) {
                        return Err(MtpError::TokenOutOfRange {
                            what: "track",
                            token: id,
                            vocab: l.rows(),
                        });
                    }
                    let row = &mut out[b * lf * slots..(b * lf + frames) * slots];
                    for (o, &id) in row.iter_mut().zip(ids) {
                        *o = i64::from(id);
                    }
                }
                (Some(_), _, _) => {
                    return bad(format!(
                        "item {b} has a phone track; this NAR model is not aligned"
                    ));
                }
            }
            for (i, &tok) in t.iter().enumerate() {
                if tok as usize >= self.text_embedding.weight.val().dims()[0] {
                    return Err(MtpError::TokenOutOfRange {
                        what: "text",
                        token: tok,
                        vocab: self.text_embedding.weight.val().dims()[0],
                    });
                }
                text[b * lt + i] = i64::from(tok);
            }
            for (q, layer) in c.iter().enumerate() {
                for (f, &code) in layer.iter().enumerate() {
                    if code as usize >= self.codebook_size {
                        return Err(MtpError::TokenOutOfRange {
                            what: "code",
                            token: code,
                            vocab: self.codebook_size,
                        });
                    }
                    codes[(b * n_q + q) * lf + f] = i64::from(code);
                }
            }
        }
        let device = self.device();
        Ok(NarInput {
            text: Tensor::from_data(TensorData::new(text, [items.len(), lt]), &device),
            codes: Tensor::from_data(TensorData::new(codes, [items.len(), n_q, lf]), &device),
            track: track
                .map(|t| Tensor::from_data(TensorData::new(t, [items.len(), lf, slots]), &device)),
            prompt_frames: items.iter().map(|i| i.prompt).collect(),
            text_lengths: items.iter().map(|i| i.text.len()).collect(),
            frame_lengths: items.iter().map(|i| i.codes[0].len()).collect(),
        })
    }

    /// Logits of layer `stage` at every frame position.
    ///
    /// # Shapes
    /// - `input.text`: `[batch, text_len]`, `input.codes`: `[batch, n_q, frames]`
    /// - output: `[batch, frames, codebook_size]` (only target frames are meaningful)
    ///
    /// # Errors
    /// [`MtpError::InvalidInput`] for a stage outside `1..n_q`; transformer errors.
    pub fn forward(&self, input: &NarInput, stage: usize) -> MtpResult<Tensor<3>> {
        let n_q = self.n_q();
        if stage == 0 || stage >= n_q {
            return Err(MtpError::InvalidInput {
                detail: format!("NAR stage {stage} outside 1..{n_q}"),
            });
        }
        let [batch, _, frames] = input.codes.dims();
        let lt = input.text.dims()[1];
        let device = self.device();
        // Which (frame, layer) entries are known: all layers in the prompt, layers < stage after.
        let mut known = vec![0f32; batch * n_q * frames];
        for b in 0..batch {
            for q in 0..n_q {
                for f in 0..frames {
                    if f < input.frame_lengths[b] && (q < stage || f < input.prompt_frames[b]) {
                        known[(b * n_q + q) * frames + f] = 1.0;
                    }
                }
            }
        }
        let known = Tensor::<3>::from_data(TensorData::new(known, [batch, n_q, frames]), &device);
        // Σ_l known_l · E_l(codes_l): [batch, frames, d]
        let mut acoustic: Option<Tensor<3>> = None;
        for (q, emb) in self.code_embeddings.iter().enumerate() {
            let codes = input.codes.clone().narrow(1, q, 1).reshape([batch, frames]);
            let mask = known.clone().narrow(1, q, 1).reshape([batch, frames, 1]);
            let e = emb.forward(codes) * mask;
            acoustic = Some(match acoustic {
                Some(acc) => acc + e,
                None => e,
            });
        }
        let mut acoustic = acoustic.ok_or_else(|| MtpError::InvalidInput {
            detail: "no code layers".into(),
        })?;
        if let (Some(track), Some(ids)) = (&self.track, &input.track) {
            acoustic = acoustic + track.forward(ids.clone());
        }
        let text = self.text_embedding.forward(input.text.clone());
        let d = text.dims()[2];
        // Each row is contiguous — its own text, SEP, its own frames, then padding — so an
        // item's positions (and outputs) do not depend on what it is batched with.
        let total = lt + 1 + frames;
        let mut rows = Vec::with_capacity(batch);
        let mut mask = vec![false; batch * total];
        for b in 0..batch {
            let (l, f) = (input.text_lengths[b], input.frame_lengths[b]);
            let mut parts = vec![
                text.clone().narrow(0, b, 1).narrow(1, 0, l),
                self.sep.val(),
                acoustic.clone().narrow(0, b, 1).narrow(1, 0, f),
            ];
            if total > l + 1 + f {
                parts.push(Tensor::zeros([1, total - l - 1 - f, d], &device));
            }
            rows.push(Tensor::cat(parts, 1));
            mask[b * total..b * total + l + 1 + f]
                .iter_mut()
                .for_each(|m| *m = true);
        }
        // [batch, lt + 1 + frames, d]
        let x = Tensor::cat(rows, 0);
        let stage_ids =
            Tensor::<2, Int>::from_data(TensorData::new(vec![stage as i64], [1, 1]), &device);
        let x = x + self.stage_embedding.forward(stage_ids);
        let mask = Tensor::<2, Bool>::from_data(TensorData::new(mask, [batch, total]), &device);
        let hidden = self.transformer.forward(x, Some(mask))?;
        // Row b's frames start at text_lengths[b] + 1: [batch, frames, d]
        let frames_hidden = Tensor::cat(
            (0..batch)
                .map(|b| {
                    hidden
                        .clone()
                        .narrow(0, b, 1)
                        .narrow(1, input.text_lengths[b] + 1, frames)
                })
                .collect(),
            0,
        );
        Ok(linear(&self.heads[stage - 1], frames_hidden))
    }

    /// Mean cross-entropy of layer `stage` over the target (non-prompt) frames.
    ///
    /// # Shapes
    /// - output: `[1]`
    ///
    /// # Errors
    /// As [`forward`](Self::forward).
    pub fn loss(&self, input: &NarInput, stage: usize) -> MtpResult<Tensor<1>> {
        let logits = self.forward(input, stage)?;
        let [batch, frames, _] = logits.dims();
        let mut weights = vec![0f32; batch * frames];
        for b in 0..batch {
            for f in input.prompt_frames[b]..input.frame_lengths[b] {
                weights[b * frames + f] = 1.0;
            }
        }
        let device = self.device();
        let weights = Tensor::<2>::from_data(TensorData::new(weights, [batch, frames]), &device);
        let targets = input
            .codes
            .clone()
            .narrow(1, stage, 1)
            .reshape([batch, frames, 1]);
        // [batch, frames]
        let logp = log_softmax(logits, 2)
            .gather(2, targets)
            .reshape([batch, frames]);
        let count = weights.clone().sum().clamp_min(1.0);
        Ok((logp * weights).sum().neg() / count)
    }

    /// Fills layers `1..n_q` of the target frames greedily, one layer per forward.
    ///
    /// # Shapes
    /// - `prompt_codes`: `[n_q][prompt_frames]`; `first_layer`: `[frames]` (the AR output)
    /// - `track`: an aligned model's track ids of the target frames, `frames · slots`
    ///   ([`FrameTrack::ids`]); the prompt's frames are told nothing
    /// - output: `[n_q][frames]`, layer 0 equal to `first_layer`
    ///
    /// # Errors
    /// As [`inputs`](Self::inputs) and [`forward`](Self::forward).
    pub fn generate(
        &self,
        text: &[u32],
        prompt_codes: &[Vec<u32>],
        first_layer: &[u32],
        track: Option<&[u32]>,
    ) -> MtpResult<Vec<Vec<u32>>> {
        let n_q = self.n_q();
        if prompt_codes.len() != n_q {
            return Err(MtpError::InvalidInput {
                detail: format!(
                    "the prompt has {} code layers, the NAR model {n_q}",
                    prompt_codes.len()
                ),
            });
        }
        let prompt = prompt_codes[0].len();
        let frames = first_layer.len();
        let mut out: Vec<Vec<u32>> = vec![vec![0; frames]; n_q];
        out[0] = first_layer.to_vec();
        // The prompt's frames get NONE, the target's the given ids.
        let track = match (track, self.track.as_ref().map(PhoneTrack::layout)) {
            (Some(ids), Some(layout)) => {
                let mut all = Vec::with_capacity((prompt + frames) * layout.slots());
                FrameTrack::push_none(prompt, &layout, &mut all);
                all.extend_from_slice(ids);
                Some(all)
            }
            (Some(_), None) => {
                return Err(MtpError::InvalidInput {
                    detail: "a phone track was given; this NAR model is not aligned".into(),
                });
            }
            (None, _) => None,
        };
        for stage in 1..n_q {
            let joined: Vec<Vec<u32>> = (0..n_q)
                .map(|q| {
                    let mut l = prompt_codes[q].clone();
                    l.extend(&out[q]);
                    l
                })
                .collect();
            let input = self.inputs(&[NarItem {
                text,
                codes: &joined,
                prompt,
                track: track.as_deref(),
            }])?;
            let logits = self.forward(&input, stage)?;
            // [1, prompt + frames, codebook] → argmax over the target frames
            let best = logits
                .narrow(1, prompt, frames)
                .argmax(2)
                .into_data()
                .convert::<i64>()
                .try_into_vec::<i64>()
                .map_err(|e| MtpError::Readback(format!("{e:?}")))?;
            out[stage] = best.into_iter().map(|c| c as u32).collect();
        }
        Ok(out)
    }
}
