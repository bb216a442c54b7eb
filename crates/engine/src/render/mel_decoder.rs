//! The codes → log-mel decoder (`voxspec_codec::MelDecoder`) on the engine's layers.

use voxspec_codec::{MelDecoder, MelDecoderConfig};

use super::layers::{Conv, ConvNext, Scratch, Upsample, layer_norm, packed};
use crate::error::{EngineError, Result};
use crate::matmul::{PackedLinear, WeightFormat};
use crate::ops::NormWeights;
use crate::stack::read_param;

/// The mel decoder with its parameters copied out of Burn.
#[derive(Debug, Clone)]
pub struct NativeMelDecoder {
    dim: usize,
    codebook_size: usize,
    /// One `[codebook_size, dim]` table per RVQ layer read.
    tables: Vec<Vec<f32>>,
    /// `[phones + 1, dim]` for a decoder with a phone input.
    phone_table: Option<Vec<f32>>,
    embed: Conv,
    norm: NormWeights,
    code_blocks: Vec<ConvNext>,
    upsample: Upsample,
    mel_blocks: Vec<ConvNext>,
    final_norm: NormWeights,
    head: PackedLinear,
}

impl NativeMelDecoder {
    /// Copies `model` (built from `config`), its linear and convolution weights stored as
    /// `format`.
    ///
    /// # Errors
    /// [`EngineError::Model`] when `config` does not describe `model` or a layer is of a kind
    /// the engine does not run; [`EngineError::Parameter`] when a tensor cannot be read.
    pub fn from_burn(
        model: &MelDecoder,
        config: &MelDecoderConfig,
        format: WeightFormat,
    ) -> Result<Self> {
        let tables = model
            .embeddings
            .iter()
            .enumerate()
            .map(|(q, e)| read_param(&e.weight, &format!("embeddings.{q}")))
            .collect::<Result<Vec<_>>>()?;
        let dim = config.dim;
        if tables.len() != config.n_q
            || tables.iter().any(|t| t.len() != config.codebook_size * dim)
            || model.phones() != config.phone_vocab()
        {
            return Err(EngineError::Model {
                detail: format!(
                    "the mel decoder config ({} layers of {} codes, width {dim}, {} phones) does \
                     not describe the model ({} layers, {} phones)",
                    config.n_q,
                    config.codebook_size,
                    config.phone_vocab(),
                    tables.len(),
                    model.phones()
                ),
            });
        }
        let blocks = |blocks: &[voxspec_codec::vocoder::ConvNextBlock], name: &str| {
            blocks
                .iter()
                .enumerate()
                .map(|(i, b)| ConvNext::from_burn(b, &format!("{name}.{i}"), format))
                .collect::<Result<Vec<_>>>()
        };
        let upsample = Upsample::from_burn(&model.upsample, "upsample", format)?;
        if upsample.factor() != config.upsample() {
            return Err(EngineError::Model {
                detail: format!(
                    "the mel decoder upsamples by {}, its config says {}",
                    upsample.factor(),
                    config.upsample()
                ),
            });
        }
        Ok(Self {
            dim,
            codebook_size: config.codebook_size,
            tables,
            phone_table: match &model.phone_embedding {
                Some(e) => Some(read_param(&e.weight, "phone_embedding")?),
                None => None,
            },
            embed: Conv::from_burn(&model.embed, "embed", format)?,
            norm: layer_norm(&model.norm, "norm")?,
            code_blocks: blocks(&model.code_blocks, "code_blocks")?,
            upsample,
            mel_blocks: blocks(&model.mel_blocks, "mel_blocks")?,
            final_norm: layer_norm(&model.final_norm, "final_norm")?,
            head: packed(&model.head, "head", format)?,
        })
    }

    /// Mel bands of the output.
    pub fn n_mels(&self) -> usize {
        self.head.out_features()
    }

    /// RVQ layers read.
    pub fn n_q(&self) -> usize {
        self.tables.len()
    }

    /// Mel frames per code frame.
    pub fn upsample_factor(&self) -> usize {
        self.upsample.factor()
    }

    /// Phone vocabulary of the phone input (0: codes alone).
    pub fn phones(&self) -> usize {
        self.phone_table
            .as_ref()
            .map_or(0, |t| (t.len() / self.dim).saturating_sub(1))
    }

    /// The log-mel of `codes`, told each frame's phone by `phones` when the decoder has a
    /// phone input (ignored otherwise); layers past [`Self::n_q`] are ignored.
    ///
    /// # Shapes
    /// `codes: [n_q' ≥ n_q][frames]`, `phones: [frames]` → (`[frames · u, n_mels]` row-major,
    /// `frames · u`)
    ///
    /// # Errors
    /// [`EngineError::Input`] for fewer layers than [`Self::n_q`], ragged layers, no frames, a
    /// code outside the codebook, or phones missing, of another length or out of range.
    pub fn log_mel(&self, codes: &[Vec<u32>], phones: Option<&[u32]>) -> Result<(Vec<f32>, usize)> {
        let frames = codes.first().map_or(0, Vec::len);
        let bad = |detail: String| Err(EngineError::Input { detail });
        if codes.len() < self.n_q() || frames == 0 || codes.iter().any(|l| l.len() != frames) {
            return bad(format!(
                "mel decoder codes: expected at least {} layers of one length >= 1, got lengths {:?}",
                self.n_q(),
                codes.iter().map(Vec::len).collect::<Vec<_>>()
            ));
        }
        let d = self.dim;
        let mut x = vec![0.0f32; frames * d];
        for (q, table) in self.tables.iter().enumerate() {
            for (row, &c) in x.chunks_exact_mut(d).zip(&codes[q]) {
                if c as usize >= self.codebook_size {
                    return bad(format!(
                        "mel decoder codes: code {c} in layer {q} is outside 0..{}",
                        self.codebook_size
                    ));
                }
                let e = &table[c as usize * d..(c as usize + 1) * d];
                row.iter_mut().zip(e).for_each(|(o, &v)| *o += v);
            }
        }
        if let Some(table) = &self.phone_table {
            let n = self.phones();
            let phones = match phones {
                Some(p) if p.len() == frames => p,
                Some(p) => {
                    return bad(format!(
                        "mel decoder phones: expected {frames} (one per frame), got {}",
                        p.len()
                    ));
                }
                None => return bad("mel decoder phones: the decoder reads the phones".into()),
            };
            for (row, &p) in x.chunks_exact_mut(d).zip(phones) {
                if p as usize > n {
                    return bad(format!("mel decoder phones: id {p} is outside 0..={n}"));
                }
                let e = &table[p as usize * d..(p as usize + 1) * d];
                row.iter_mut().zip(e).for_each(|(o, &v)| *o += v);
            }
        }
        let mut s = Scratch::default();
        let mut cols = Vec::new();
        let mut h = vec![0.0f32; frames * d];
        self.embed.forward(&x, frames, &mut cols, &mut h);
        self.norm.forward(&h, &mut x);
        for block in &self.code_blocks {
            block.forward(&mut x, frames, &mut s);
        }
        let mel_frames = frames * self.upsample.factor();
        let mut up = vec![0.0f32; mel_frames * d];
        self.upsample.forward(&x, frames, &mut cols, &mut up);
        for block in &self.mel_blocks {
            block.forward(&mut up, mel_frames, &mut s);
        }
        let mut n = vec![0.0f32; mel_frames * d];
        self.final_norm.forward(&up, &mut n);
        let mut mel = vec![0.0f32; mel_frames * self.n_mels()];
        self.head.forward(&n, mel_frames, &mut mel);
        Ok((mel, mel_frames))
    }
}
