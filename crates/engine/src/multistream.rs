//! [`NativeMultiStream`]: the delayed multi-stream LM (`voxspec_multistream::MultiStreamModel`)
//! on the engine's kernels, so its frame decoders pay the small-M cost per forward over k new
//! columns instead of Burn's per-column cost. Built from a loaded Burn model — the parameters
//! copied out once, the linear weights packed — and driven through `voxspec_infer::FrameModel`
//! (see `multistream_lm.rs`) exactly as `voxspec_multistream::MsFrameLm` is.
//!
//! ```text
//! position:  0 (voice)            | 1 … L (text)          | speech step s
//! input:     E_seg[VOICE] + W_g·g | E_text[x] + E_seg[TEXT] | E_seg[SPEECH] + Σ_j E_j[col_s[j]]
//!            (+ the step-track embedding: NONE ids outside speech, step s's ids at speech)
//! └─ the shared transformer stack (over the KV cache) ─▶ hidden h
//! └─ head 0: [h·W_0 | … | h·W_{K−1}] (one packed d → K·(codebook+1) product)
//!    head i ≥ 1 (Medusa): outs_i(h + SiLU(residual_i(h))), outs_i packed the same way
//! ```

use burn::nn::Linear;
use voxspec_multistream::input::{SPEECH, TEXT, VOICE};
use voxspec_multistream::{MsAlignConfig, MultiStreamConfig, MultiStreamModel};

use crate::error::{EngineError, Result};
use crate::matmul::{PackedLinear, WeightFormat};
use crate::stack::{Stack, linear, read_param};

/// The step-track embedding of an aligned model: `(Σ_slots table[id]) / √slots` per position,
/// as `voxspec_mtp::summed_slots` computes it.
#[derive(Debug, Clone)]
pub(crate) struct StepTable {
    /// `[rows, d]`.
    pub(crate) table: Vec<f32>,
    pub(crate) align: MsAlignConfig,
    /// `1 / √slots`.
    pub(crate) scale: f32,
    /// The id every slot holds outside speech (`align.none_id(text_vocab)`).
    pub(crate) none_id: u32,
    /// `[d]`: the track's contribution at a voice or text position (every slot NONE).
    pub(crate) none_row: Vec<f32>,
}

impl StepTable {
    /// Adds the track embedding of the slot ids `ids` to `x` (`[d]`), summing into `tmp`
    /// (`[d]`) first as Burn sums the slots before scaling.
    pub(crate) fn add(&self, ids: &[u32], tmp: &mut [f32], x: &mut [f32]) {
        let d = x.len();
        tmp.fill(0.0);
        for &id in ids {
            let row = &self.table[id as usize * d..(id as usize + 1) * d];
            for (t, &v) in tmp.iter_mut().zip(row) {
                *t += v;
            }
        }
        for (xv, &t) in x.iter_mut().zip(tmp.iter()) {
            *xv += t * self.scale;
        }
    }
}

/// One extra (multi-token) head: `outs(h + SiLU(residual(h)))`, `outs` the K per-stream output
/// layers packed side by side.
#[derive(Debug, Clone)]
pub(crate) struct AheadHead {
    /// `d → d`.
    pub(crate) residual: PackedLinear,
    /// `d → K·(codebook_size + 1)`.
    pub(crate) outs: PackedLinear,
}

/// The delayed multi-stream LM on the native engine (f32 arithmetic over f32 or bf16 linear
/// weights). Keeps the Burn model and its config for what runs once per utterance (the
/// duration predictor behind `MsPrompt::new` / `request_track`).
#[derive(Debug, Clone)]
pub struct NativeMultiStream {
    pub(crate) burn: MultiStreamModel,
    pub(crate) config: MultiStreamConfig,
    /// Model width.
    pub(crate) d: usize,
    /// Streams `K`.
    pub(crate) streams: usize,
    /// Classes per head and input ids per stream: `codebook_size + 1`.
    pub(crate) vocab: usize,
    pub(crate) stack: Stack,
    /// `[text_vocab, d]`.
    pub(crate) text_embedding: Vec<f32>,
    /// Per stream: `[codebook_size + 1, d]`.
    pub(crate) stream_embeddings: Vec<Vec<f32>>,
    /// `[3, d]`: voice, text, speech.
    pub(crate) segment: Vec<f32>,
    /// `global_dim → d`, kept f32 (it runs once per utterance).
    pub(crate) voice: Option<PackedLinear>,
    pub(crate) track: Option<StepTable>,
    /// Head 0: `d → K·(codebook_size + 1)`, stream-major.
    pub(crate) heads: PackedLinear,
    /// Heads 1.. (multi-token prediction).
    pub(crate) ahead: Vec<AheadHead>,
}

/// The K linear layers `d → n_j` as one `d → Σ n_j` layer, outputs side by side in order;
/// a missing bias counts as zeros when another layer has one.
fn fused(layers: &[Linear], name: &str) -> Result<PackedLinear> {
    let first = layers.first().ok_or_else(|| EngineError::Model {
        detail: format!("{name}: no layer to fuse"),
    })?;
    let k = first.weight.val().dims()[0];
    let mut weights = Vec::with_capacity(layers.len());
    let mut widths = Vec::with_capacity(layers.len());
    for (j, l) in layers.iter().enumerate() {
        let [kj, nj] = l.weight.val().dims();
        if kj != k {
            return Err(EngineError::Model {
                detail: format!("{name}.{j}: {kj} inputs, layer 0 has {k}"),
            });
        }
        weights.push(read_param(&l.weight, &format!("{name}.{j}.weight"))?);
        widths.push(nj);
    }
    let n: usize = widths.iter().sum();
    let mut w = Vec::with_capacity(k * n);
    for row in 0..k {
        for (wj, &nj) in weights.iter().zip(&widths) {
            w.extend_from_slice(&wj[row * nj..(row + 1) * nj]);
        }
    }
    let bias = if layers.iter().any(|l| l.bias.is_some()) {
        let mut b = Vec::with_capacity(n);
        for (j, (l, &nj)) in layers.iter().zip(&widths).enumerate() {
            match &l.bias {
                Some(bias) => b.extend(read_param(bias, &format!("{name}.{j}.bias"))?),
                None => b.extend(std::iter::repeat_n(0.0, nj)),
            }
        }
        Some(b)
    } else {
        None
    };
    PackedLinear::new(&w, k, n, bias)
}

fn mismatch<T>(detail: String) -> Result<T> {
    Err(EngineError::Model { detail })
}

/// Rows of an embedding table read as f32, checked against the expected shape.
fn table(
    weight: &burn::module::Param<burn::tensor::Tensor<2>>,
    rows: usize,
    d: usize,
    name: &str,
) -> Result<Vec<f32>> {
    let [r, c] = weight.val().dims();
    if (r, c) != (rows, d) {
        return Err(EngineError::Model {
            detail: format!("{name} is [{r}, {c}], the config implies [{rows}, {d}]"),
        });
    }
    read_param(weight, name)
}

impl NativeMultiStream {
    /// Copies the parameters of `model` (built from `config`) into the engine, linear weights
    /// f32.
    ///
    /// # Errors
    /// [`EngineError::Model`] when `config` does not describe `model`;
    /// [`EngineError::Parameter`] when a tensor cannot be read as f32.
    pub fn from_burn(model: &MultiStreamModel, config: &MultiStreamConfig) -> Result<Self> {
        Self::from_burn_with(model, config, WeightFormat::F32)
    }

    /// [`from_burn`](Self::from_burn) with the per-step linear weights (transformer layers,
    /// the stream heads, the multi-token heads) stored as `weights`; embedding tables, norms,
    /// biases and the voice projection stay f32.
    ///
    /// # Errors
    /// As [`from_burn`](Self::from_burn).
    pub fn from_burn_with(
        model: &MultiStreamModel,
        config: &MultiStreamConfig,
        weights: WeightFormat,
    ) -> Result<Self> {
        let t = &model.transformer;
        let tc = &config.transformer;
        if (t.d_model(), t.n_heads(), t.n_layers(), t.max_seq_len())
            != (tc.d_model, tc.n_heads, tc.n_layers, tc.max_seq_len)
        {
            return mismatch(format!(
                "the config's transformer (d_model {}, {} heads, {} layers, max_seq_len {}) \
                 does not describe the model's (d_model {}, {} heads, {} layers, max_seq_len {})",
                tc.d_model,
                tc.n_heads,
                tc.n_layers,
                tc.max_seq_len,
                t.d_model(),
                t.n_heads(),
                t.n_layers(),
                t.max_seq_len()
            ));
        }
        let (d, k, vocab) = (t.d_model(), config.streams, config.output_vocab());
        if model.streams() != k || model.stream_embeddings.len() != k {
            return mismatch(format!(
                "the config has {k} streams, the model {} heads and {} stream embeddings",
                model.streams(),
                model.stream_embeddings.len()
            ));
        }
        if model.ahead.len() + 1 != config.n_heads() {
            return mismatch(format!(
                "the config has {} prediction heads, the model {}",
                config.n_heads(),
                model.ahead.len() + 1
            ));
        }
        if model.voice_projection.is_some() != (config.global_dim > 0) {
            return mismatch(format!(
                "global_dim {} but the model {} a voice projection",
                config.global_dim,
                if model.voice_projection.is_some() {
                    "has"
                } else {
                    "lacks"
                }
            ));
        }
        let stack = Stack::from_burn(t, tc)?.into_format(weights);
        let text_embedding = table(
            &model.text_embedding.weight,
            config.text_vocab,
            d,
            "text_embedding",
        )?;
        let stream_embeddings = model
            .stream_embeddings
            .iter()
            .enumerate()
            .map(|(j, e)| table(&e.weight, vocab, d, &format!("stream_embeddings.{j}")))
            .collect::<Result<Vec<_>>>()?;
        let segment = table(&model.segment_embedding.weight, 3, d, "segment_embedding")?;
        let voice = match &model.voice_projection {
            Some(p) => {
                let v = linear(p, "voice_projection")?;
                if (v.in_features(), v.out_features()) != (config.global_dim, d) {
                    return mismatch(format!(
                        "voice_projection is {} → {}, the config implies {} → {d}",
                        v.in_features(),
                        v.out_features(),
                        config.global_dim
                    ));
                }
                Some(v)
            }
            None => None,
        };
        let track = match (&model.track, &config.align) {
            (Some(track), Some(align)) => {
                let rows = align.rows(config.text_vocab);
                let table = table(&track.embedding.weight, rows, d, "track.embedding")?;
                let slots = align.slots();
                let scale = (1.0 / (slots as f64).sqrt()) as f32;
                let none_id = align.none_id(config.text_vocab);
                let none = &table[none_id as usize * d..(none_id as usize + 1) * d];
                let mut sum = vec![0.0f32; d];
                for _ in 0..slots {
                    for (s, &v) in sum.iter_mut().zip(none) {
                        *s += v;
                    }
                }
                let none_row = sum.iter().map(|s| s * scale).collect();
                Some(StepTable {
                    table,
                    align: align.clone(),
                    scale,
                    none_id,
                    none_row,
                })
            }
            (None, None) => None,
            (Some(_), None) | (None, Some(_)) => {
                return mismatch(format!(
                    "the config {} alignment, the model {} a step track",
                    if config.align.is_some() {
                        "has"
                    } else {
                        "has no"
                    },
                    if model.track.is_some() {
                        "has"
                    } else {
                        "lacks"
                    }
                ));
            }
        };
        let heads = fused(&model.heads, "heads")?.into_format(weights);
        if (heads.in_features(), heads.out_features()) != (d, k * vocab) {
            return mismatch(format!(
                "the stream heads are {} → {}, the config implies {d} → {}",
                heads.in_features(),
                heads.out_features(),
                k * vocab
            ));
        }
        let ahead = model
            .ahead
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let residual = linear(&h.residual, &format!("ahead.{i}.residual"))?;
                let outs = fused(&h.outs, &format!("ahead.{i}.outs"))?;
                if (residual.in_features(), residual.out_features()) != (d, d)
                    || (outs.in_features(), outs.out_features()) != (d, k * vocab)
                {
                    return mismatch(format!(
                        "ahead.{i} is {} → {} then {} → {}, the config implies {d} → {d} then \
                         {d} → {}",
                        residual.in_features(),
                        residual.out_features(),
                        outs.in_features(),
                        outs.out_features(),
                        k * vocab
                    ));
                }
                Ok(AheadHead {
                    residual: residual.into_format(weights),
                    outs: outs.into_format(weights),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            burn: model.clone(),
            config: config.clone(),
            d,
            streams: k,
            vocab,
            stack,
            text_embedding,
            stream_embeddings,
            segment,
            voice,
            track,
            heads,
            ahead,
        })
    }

    /// How the per-step linear weights are stored.
    pub fn weight_format(&self) -> WeightFormat {
        self.stack.format()
    }

    /// The Burn model the engine was built from.
    pub fn burn(&self) -> &MultiStreamModel {
        &self.burn
    }

    /// Its configuration.
    pub fn config(&self) -> &MultiStreamConfig {
        &self.config
    }

    /// Parameters of the linear layers and heads one step reads (embedding tables, the voice
    /// projection and the duration predictor excluded).
    pub fn num_params(&self) -> usize {
        let layers: usize = self.stack.layers.iter().map(|l| l.num_params()).sum();
        let ahead: usize = self
            .ahead
            .iter()
            .map(|h| h.residual.num_params() + h.outs.num_params())
            .sum();
        layers + self.heads.num_params() + ahead
    }

    /// Bytes of weights one step over one column reads when every head is evaluated: the
    /// linear layers and the heads in their [`WeightFormat`], with their f32 biases.
    pub fn weight_bytes(&self) -> usize {
        let ahead: usize = self
            .ahead
            .iter()
            .map(|h| h.residual.weight_bytes() + h.outs.weight_bytes())
            .sum();
        self.stack.weight_bytes() + self.heads.weight_bytes() + ahead
    }

    /// Writes the input embedding of a voice position into `x` (`[d]`): the segment, the
    /// track's NONE ids, the projected voice `W_g · g + b`; `tmp` (`[d]`) is overwritten.
    pub(crate) fn embed_voice(&self, voice: &[f32], tmp: &mut [f32], x: &mut [f32]) {
        let d = self.d;
        x.copy_from_slice(&self.segment[VOICE as usize * d..(VOICE as usize + 1) * d]);
        if let Some(track) = &self.track {
            for (xv, &t) in x.iter_mut().zip(&track.none_row) {
                *xv += t;
            }
        }
        if let Some(proj) = &self.voice {
            proj.forward(voice, 1, tmp);
            for (xv, &v) in x.iter_mut().zip(tmp.iter()) {
                *xv += v;
            }
        }
    }

    /// Writes the input embedding of a text position into `x` (`[d]`): text + segment (+ the
    /// track's NONE ids). `id < text_vocab`, checked by the caller.
    pub(crate) fn embed_text(&self, id: u32, x: &mut [f32]) {
        let d = self.d;
        let (id, seg) = (id as usize, TEXT as usize);
        for ((xv, &e), &s) in x
            .iter_mut()
            .zip(&self.text_embedding[id * d..(id + 1) * d])
            .zip(&self.segment[seg * d..(seg + 1) * d])
        {
            *xv = e + s;
        }
        if let Some(track) = &self.track {
            for (xv, &t) in x.iter_mut().zip(&track.none_row) {
                *xv += t;
            }
        }
    }

    /// Writes the input embedding of a speech step into `x` (`[d]`): segment, the K stream
    /// embeddings of `column` in stream order, then the step's track ids `track_ids` (empty for
    /// an unaligned model); `tmp` (`[d]`) is overwritten. Ids `< codebook_size + 1`, checked
    /// by the caller.
    pub(crate) fn embed_step(
        &self,
        column: &[u32],
        track_ids: &[u32],
        tmp: &mut [f32],
        x: &mut [f32],
    ) {
        let d = self.d;
        let seg = SPEECH as usize;
        x.copy_from_slice(&self.segment[seg * d..(seg + 1) * d]);
        for (table, &id) in self.stream_embeddings.iter().zip(column) {
            let id = id as usize;
            for (xv, &e) in x.iter_mut().zip(&table[id * d..(id + 1) * d]) {
                *xv += e;
            }
        }
        if let Some(track) = &self.track {
            track.add(track_ids, tmp, x);
        }
    }
}
