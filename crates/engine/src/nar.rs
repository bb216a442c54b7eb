//! [`NativeNar`]: voxspec's NAR model (`voxspec_mtp::NarModel`, code layers 2..N from the AR
//! model's RVQ-1 codes) on the engine's kernels, built from a loaded Burn model like
//! [`crate::NativeMtp`]. One stage is one bidirectional pass over the text, the separator and
//! every frame:
//!
//! ```text
//! rows: text embeddings │ SEP │ frames: Σ_{known layers q} E_q(code_q)      (+ stage embedding)
//! └─ bidirectional stack ─▶ hidden of the target frames ─▶ heads[stage − 1] ─▶ argmax
//! ```
//!
//! A frame's known layers are all of them in the prompt and layers below the stage after it,
//! as `NarModel::forward` masks them; the stages run in order, each filling one layer. An
//! aligned NAR adds each target frame's phone-track embedding (the prompt's frames get NONE).

use std::path::Path;

use burn::tensor::Device;
use voxspec_mtp::{FrameTrack, NarConfig, NarModel, TrackLayout, load_nar};

use crate::cache::{NativeCache, ensure};
use crate::error::{EngineError, Result};
use crate::matmul::{PackedLinear, WeightFormat};
use crate::stack::{Stack, linear, read_param};

/// The NAR model on the native engine.
#[derive(Debug, Clone)]
pub struct NativeNar {
    d: usize,
    n_q: usize,
    codebook_size: usize,
    /// `[text_vocab, d]`.
    text_embedding: Vec<f32>,
    /// Per layer `[codebook_size, d]`.
    code_embeddings: Vec<Vec<f32>>,
    /// `[n_q, d]`.
    stage_embedding: Vec<f32>,
    /// `[d]`.
    sep: Vec<f32>,
    stack: Stack,
    /// `heads[j − 1]` predicts layer j: `d → codebook_size`.
    heads: Vec<PackedLinear>,
    /// An aligned model's track: its layout and embedding table `[rows, d]`.
    track: Option<(TrackLayout, Vec<f32>)>,
}

impl NativeNar {
    /// Copies the parameters of `model` (built from `config`) into the engine.
    ///
    /// # Errors
    /// [`EngineError::Model`] when `config` does not describe `model` or the stack is causal;
    /// [`EngineError::Parameter`] when a tensor cannot be read as f32.
    pub fn from_burn(model: &NarModel, config: &NarConfig) -> Result<Self> {
        Self::from_burn_with(model, config, WeightFormat::F32)
    }

    /// [`from_burn`](Self::from_burn) with the linear weights (the transformer layers' and
    /// the heads') stored as `weights`; embeddings, norms and biases stay f32.
    ///
    /// # Errors
    /// As [`from_burn`](Self::from_burn).
    pub fn from_burn_with(
        model: &NarModel,
        config: &NarConfig,
        weights: WeightFormat,
    ) -> Result<Self> {
        let t = &model.transformer;
        let tc = &config.transformer;
        if (t.d_model(), t.n_heads(), t.n_layers(), t.max_seq_len())
            != (tc.d_model, tc.n_heads, tc.n_layers, tc.max_seq_len)
            || (model.n_q(), model.codebook_size()) != (config.n_q, config.codebook_size)
        {
            return Err(EngineError::Model {
                detail: format!(
                    "the NAR config (d_model {}, {} heads, {} layers, max_seq_len {}, {} layers \
                     of {} codes) does not describe the model",
                    tc.d_model,
                    tc.n_heads,
                    tc.n_layers,
                    tc.max_seq_len,
                    config.n_q,
                    config.codebook_size
                ),
            });
        }
        if t.is_causal() {
            return Err(EngineError::Model {
                detail: "the NAR model's transformer is causal; it must be bidirectional".into(),
            });
        }
        let code_embeddings = model
            .code_embeddings
            .iter()
            .enumerate()
            .map(|(q, e)| read_param(&e.weight, &format!("code_embeddings.{q}")))
            .collect::<Result<Vec<_>>>()?;
        let heads = model
            .heads
            .iter()
            .enumerate()
            .map(|(j, h)| Ok(linear(h, &format!("heads.{j}"))?.into_format(weights)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            d: t.d_model(),
            n_q: model.n_q(),
            codebook_size: model.codebook_size(),
            text_embedding: read_param(&model.text_embedding.weight, "text_embedding")?,
            code_embeddings,
            stage_embedding: read_param(&model.stage_embedding.weight, "stage_embedding")?,
            sep: read_param(&model.sep, "sep")?,
            stack: Stack::from_burn(t, tc)?.into_format(weights),
            heads,
            track: match &model.track {
                Some(track) => Some((
                    track.layout(),
                    read_param(&track.embedding.weight, "track.embedding")?,
                )),
                None => None,
            },
        })
    }

    /// Loads a NAR model directory through `voxspec_mtp::load_nar` on the CPU and builds the
    /// engine from it.
    ///
    /// # Errors
    /// [`EngineError::Load`] naming the directory; as [`from_burn`](Self::from_burn).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, WeightFormat::F32)
    }

    /// [`load`](Self::load) with the linear weights stored as `weights`.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_with(dir: &Path, weights: WeightFormat) -> Result<Self> {
        let (config, model) = load_nar(dir, &Device::flex()).map_err(|e| EngineError::Load {
            path: dir.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::from_burn_with(&model, &config, weights)
    }

    /// How the linear weights are stored.
    pub fn weight_format(&self) -> WeightFormat {
        self.stack.format()
    }

    /// The engine with its linear weights (transformer layers and heads) stored as `format`.
    pub fn into_weight_format(self, format: WeightFormat) -> Self {
        Self {
            stack: self.stack.into_format(format),
            heads: self
                .heads
                .into_iter()
                .map(|h| h.into_format(format))
                .collect(),
            ..self
        }
    }

    /// The track layout of an aligned model.
    pub fn track_layout(&self) -> Option<TrackLayout> {
        self.track.as_ref().map(|(layout, _)| *layout)
    }

    /// RVQ layers (the model predicts layers `1..n_q`).
    pub fn n_q(&self) -> usize {
        self.n_q
    }

    /// Positions of one pass (text, separator and frames together).
    pub fn max_seq_len(&self) -> usize {
        self.stack.max_seq_len
    }

    /// Logits of layer `stage` at every frame after the prompt.
    ///
    /// # Shapes
    /// - `text`: `[text_len]`; `codes`: `[n_q][frames]`, prompt frames first (all layers known),
    ///   then target frames (layers `< stage` known)
    /// - `track`: an aligned model's track ids of the target frames, `(frames − prompt) · slots`
    /// - returns: `[frames − prompt, codebook_size]`, row-major
    ///
    /// # Errors
    /// [`EngineError::Model`] naming what is out of range (stage, text token, code, shapes,
    /// track, length past the context).
    pub fn stage_logits(
        &self,
        text: &[u32],
        codes: &[Vec<u32>],
        prompt: usize,
        stage: usize,
        track: Option<&[u32]>,
    ) -> Result<Vec<f32>> {
        let mut cache = self.cache_for(text, codes, prompt)?;
        let track = self.frame_track(track, prompt, codes[0].len() - prompt)?;
        self.pass(&mut cache, text, codes, prompt, stage, track.as_deref())?;
        let frames = codes[0].len();
        let rows = frames - prompt;
        let mut logits = vec![0.0; rows * self.codebook_size];
        let from = (text.len() + 1 + prompt) * self.d;
        self.heads[stage - 1].forward(&cache.scratch.h[from..], rows, &mut logits);
        Ok(logits)
    }

    /// Fills layers `1..n_q` of the target frames greedily, one layer per pass, as
    /// `NarModel::generate` does.
    ///
    /// # Shapes
    /// - `prompt_codes`: `[n_q][prompt_frames]`; `first_layer`: `[frames]` (the AR output)
    /// - `track`: an aligned model's track ids of the target frames, `frames · slots`
    /// - returns: `[n_q][frames]`, layer 0 equal to `first_layer`
    ///
    /// # Errors
    /// As [`stage_logits`](Self::stage_logits).
    pub fn generate(
        &self,
        text: &[u32],
        prompt_codes: &[Vec<u32>],
        first_layer: &[u32],
        track: Option<&[u32]>,
    ) -> Result<Vec<Vec<u32>>> {
        self.generate_layers(text, prompt_codes, first_layer, track, self.n_q)
    }

    /// [`generate`](Self::generate) up to layer `layers` (at most the model's `n_q`): the
    /// first `layers` layers, the same as `generate`'s, for `layers − 1` passes instead of
    /// `n_q − 1` — what a renderer reading fewer layers needs.
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn generate_layers(
        &self,
        text: &[u32],
        prompt_codes: &[Vec<u32>],
        first_layer: &[u32],
        track: Option<&[u32]>,
        layers: usize,
    ) -> Result<Vec<Vec<u32>>> {
        let layers = layers.clamp(1, self.n_q);
        if prompt_codes.len() != self.n_q {
            return Err(EngineError::Model {
                detail: format!(
                    "the prompt has {} code layers, the NAR model {}",
                    prompt_codes.len(),
                    self.n_q
                ),
            });
        }
        let prompt = prompt_codes[0].len();
        let frames = first_layer.len();
        // Every layer of every frame, prompt first; target layers ≥ 1 start at 0 (masked).
        let mut joined: Vec<Vec<u32>> = prompt_codes
            .iter()
            .map(|l| {
                let mut row = l.clone();
                row.resize(prompt + frames, 0);
                row
            })
            .collect();
        joined[0][prompt..].copy_from_slice(first_layer);
        let mut cache = self.cache_for(text, &joined, prompt)?;
        let track = self.frame_track(track, prompt, frames)?;
        let mut logits = vec![0.0; frames * self.codebook_size];
        let from = (text.len() + 1 + prompt) * self.d;
        for stage in 1..layers {
            self.pass(&mut cache, text, &joined, prompt, stage, track.as_deref())?;
            self.heads[stage - 1].forward(&cache.scratch.h[from..], frames, &mut logits);
            for (f, row) in logits.chunks_exact(self.codebook_size).enumerate() {
                joined[stage][prompt + f] = argmax(row);
            }
        }
        Ok(joined
            .into_iter()
            .take(layers)
            .map(|mut l| l.split_off(prompt))
            .collect())
    }

    /// The summed, scaled track embedding of every frame (prompt NONE, then the target's
    /// `ids`), `[prompt + frames, d]`; `None` for a model without a track or no ids.
    fn frame_track(
        &self,
        ids: Option<&[u32]>,
        prompt: usize,
        frames: usize,
    ) -> Result<Option<Vec<f32>>> {
        let bad = |detail: String| Err(EngineError::Model { detail });
        let (layout, table, ids) = match (&self.track, ids) {
            (_, None) => return Ok(None),
            (None, Some(_)) => {
                return bad("a phone track was given; this NAR model is not aligned".into());
            }
            (Some((layout, table)), Some(ids)) => (layout, table, ids),
        };
        let slots = layout.slots();
        if ids.len() != frames * slots {
            return bad(format!(
                "{} track ids for {frames} frames of {slots} slots",
                ids.len()
            ));
        }
        let mut all = Vec::with_capacity((prompt + frames) * slots);
        FrameTrack::push_none(prompt, layout, &mut all);
        all.extend_from_slice(ids);
        let rows = layout.rows();
        if let Some(&id) = all.iter().find(|&&id| id as usize >= rows) {
            return bad(format!("track id {id} outside the table of {rows}"));
        }
        let d = self.d;
        let scale = 1.0 / (slots as f32).sqrt();
        let mut out = vec![0.0; (prompt + frames) * d];
        for (row, frame_ids) in out.chunks_exact_mut(d).zip(all.chunks_exact(slots)) {
            for &id in frame_ids {
                let e = &table[id as usize * d..(id as usize + 1) * d];
                for (o, &v) in row.iter_mut().zip(e) {
                    *o += v;
                }
            }
            for o in row.iter_mut() {
                *o *= scale;
            }
        }
        Ok(Some(out))
    }

    /// Checks the inputs and makes a cache for one pass over them.
    fn cache_for(&self, text: &[u32], codes: &[Vec<u32>], prompt: usize) -> Result<NativeCache> {
        let bad = |detail: String| Err(EngineError::Model { detail });
        if text.is_empty() {
            return bad("the NAR needs at least one text token".into());
        }
        if codes.len() != self.n_q {
            return bad(format!(
                "{} code layers given, the NAR model has {}",
                codes.len(),
                self.n_q
            ));
        }
        let frames = codes[0].len();
        if codes.iter().any(|l| l.len() != frames) || prompt > frames {
            return bad(format!(
                "code layers of {:?} frames with a prompt of {prompt}",
                codes.iter().map(Vec::len).collect::<Vec<_>>()
            ));
        }
        let vocab = self.text_embedding.len() / self.d;
        if let Some(&t) = text.iter().find(|&&t| t as usize >= vocab) {
            return bad(format!("text token {t} outside the vocabulary of {vocab}"));
        }
        if let Some(&c) = codes
            .iter()
            .flatten()
            .find(|&&c| c as usize >= self.codebook_size)
        {
            return bad(format!(
                "code {c} outside the codebook of {}",
                self.codebook_size
            ));
        }
        let total = text.len() + 1 + frames;
        if total > self.stack.max_seq_len {
            return bad(format!(
                "{} text tokens, a separator and {frames} frames take {total} positions, more \
                 than the NAR model's {}",
                text.len(),
                self.stack.max_seq_len
            ));
        }
        self.stack.new_cache(1, total)
    }

    /// One bidirectional pass for `stage`: the final hidden states of every row end in the
    /// cache's scratch `h`. The inputs were checked by [`cache_for`](Self::cache_for).
    fn pass(
        &self,
        cache: &mut NativeCache,
        text: &[u32],
        codes: &[Vec<u32>],
        prompt: usize,
        stage: usize,
        track: Option<&[f32]>,
    ) -> Result<()> {
        if stage == 0 || stage >= self.n_q {
            return Err(EngineError::Model {
                detail: format!("NAR stage {stage} outside 1..{}", self.n_q),
            });
        }
        let d = self.d;
        let frames = codes[0].len();
        let total = text.len() + 1 + frames;
        cache.lengths[0] = 0;
        let s = &mut cache.scratch;
        s.rows.clear();
        s.rows.extend((0..total).map(|pos| (0, pos)));
        ensure(&mut s.x, total * d);
        let stage_row = &self.stage_embedding[stage * d..(stage + 1) * d];
        for (r, x) in s.x[..total * d].chunks_exact_mut(d).enumerate() {
            if r < text.len() {
                let t = text[r] as usize;
                x.copy_from_slice(&self.text_embedding[t * d..(t + 1) * d]);
            } else if r == text.len() {
                x.copy_from_slice(&self.sep);
            } else {
                let f = r - text.len() - 1;
                let known = if f < prompt { self.n_q } else { stage };
                for (q, table) in self.code_embeddings.iter().enumerate().take(known) {
                    let c = codes[q][f] as usize;
                    let e = &table[c * d..(c + 1) * d];
                    if q == 0 {
                        x.copy_from_slice(e);
                    } else {
                        for (xv, &ev) in x.iter_mut().zip(e) {
                            *xv += ev;
                        }
                    }
                }
                if let Some(track) = track {
                    for (xv, &tv) in x.iter_mut().zip(&track[f * d..(f + 1) * d]) {
                        *xv += tv;
                    }
                }
            }
            for (xv, &sv) in x.iter_mut().zip(stage_row) {
                *xv += sv;
            }
        }
        self.stack.forward(cache, &[total], false);
        Ok(())
    }
}

/// Index of the largest value (the first of equals, as Burn's `argmax`).
fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}
