//! The codes → log-mel decoder: renders the RVQ codes of the SpeechTokenizer-style codec as the
//! log-mel spectrogram a vocoder (or Griffin-Lim) turns into samples, in place of the codec's
//! own SEANet waveform decoder. Vocos showed that a frame-rate network rendering a spectral
//! representation decodes a codec's tokens well (Siuzdenko 2023, §4.3); here the network stops
//! at the mel spectrogram, a regression target that needs no phase and no discriminator.
//!
//! ```text
//! codes [n_q, B, T]  (the first n_q RVQ layers, T frames at the codec's rate)
//! phones [B, T]      (optional: the phone each frame speaks, from the alignment)
//!   └ Σ_q Embedding_q(codes[q]) (+ Embedding_p(phones))        [B, dim, T]
//!   └ Conv1d(dim → dim, k) ─ LayerNorm
//!   └ n_code_blocks × ConvNeXt block             (at the code rate)
//!   └ ConvTranspose1d(dim → dim, stride u)       u = codec hop / mel hop   [B, dim, T·u]
//!   └ n_mel_blocks × ConvNeXt block              (at the mel rate)
//!   └ LayerNorm ─ Linear(dim → n_mels)                          log-mel [B, n_mels, T·u]
//! ```
//!
//! A decoder with a phone input (`phones > 0`) is told, besides the codes, which phone each
//! code frame speaks: at synthesis the phone durations the aligned AR model was given place
//! them, in training the forced alignment does. With the phones given, the first RVQ layer
//! alone renders intelligible speech, and synthesis skips the NAR stages.
//!
//! Mel frame `u·t + j` is centred inside code frame `t`, so the output lines up with the
//! vocoder's centred log-mel of the same samples (`1 + samples / hop` frames, of which the
//! first `T·u` are predicted).

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig, ConvTranspose1d, ConvTranspose1dConfig};
use burn::nn::{
    Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig1d,
};
use burn::tensor::{Device, Int, Tensor};
use voxspec_audio::MelConfig;

use crate::error::VocoderError;
use crate::vocoder::{ConvNextBlock, NORM_EPSILON, VocosConfig};

/// Shape of a [`MelDecoder`] and the mel front end its output matches.
#[derive(Config, Debug, PartialEq)]
pub struct MelDecoderConfig {
    /// RVQ layers read (the first `n_q` of the codec's).
    pub n_q: usize,
    /// Entries per codebook.
    pub codebook_size: usize,
    /// Samples per code frame (the codec's hop); a multiple of the mel hop.
    pub codec_hop: usize,
    /// The log-mel it predicts: the vocoder's front end (`VocosConfig::mel_config`).
    pub mel: MelConfig,
    /// Backbone width.
    #[config(default = 256)]
    pub dim: usize,
    /// Width of the ConvNeXt pointwise expansion.
    #[config(default = 768)]
    pub intermediate_dim: usize,
    /// Depthwise kernel size (odd).
    #[config(default = 7)]
    pub kernel_size: usize,
    /// ConvNeXt blocks at the code rate.
    #[config(default = 4)]
    pub n_code_blocks: usize,
    /// ConvNeXt blocks at the mel rate.
    #[config(default = 2)]
    pub n_mel_blocks: usize,
    /// Phone vocabulary of the phone input (the text tokenizer's size; id `phones` is "no
    /// phone", after the speech ends); `None` (or 0) for a decoder of codes alone.
    #[config(default = "None")]
    pub phones: Option<usize>,
}

impl MelDecoderConfig {
    /// A decoder of the first `n_q` layers of a codec with `codebook_size` entries per layer and
    /// `codec_hop` samples per frame, predicting the log-mel `vocoder` takes.
    pub fn for_vocoder(
        n_q: usize,
        codebook_size: usize,
        codec_hop: usize,
        vocoder: &VocosConfig,
    ) -> Self {
        Self::new(n_q, codebook_size, codec_hop, vocoder.mel_config())
    }

    /// The phone id of each of `frames` code frames of `text` spoken for `durations` frames
    /// per token (frames past their sum, and every frame when the lengths differ, get the
    /// "no phone" id `phones`).
    pub fn frame_phones(&self, text: &[u32], durations: &[u32], frames: usize) -> Vec<u32> {
        let end = self.phone_vocab() as u32;
        let mut out = Vec::with_capacity(frames);
        if text.len() == durations.len() {
            for (&p, &d) in text.iter().zip(durations) {
                let take = (d as usize).min(frames - out.len());
                out.extend(std::iter::repeat_n(p, take));
            }
        }
        out.resize(frames, end);
        out
    }

    /// Phone vocabulary of the phone input; 0 for a decoder of codes alone.
    pub fn phone_vocab(&self) -> usize {
        self.phones.unwrap_or(0)
    }

    /// Mel frames per code frame.
    pub fn upsample(&self) -> usize {
        self.codec_hop / self.mel.hop_length.max(1)
    }

    /// Whether `vocoder` takes the log-mel this decoder predicts (same front end).
    pub fn fits(&self, vocoder: &VocosConfig) -> bool {
        self.mel == vocoder.mel_config()
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] naming the first bad field; [`VocoderError::Audio`] for
    /// a mel front end the audio crate rejects.
    pub fn validate(&self) -> Result<(), VocoderError> {
        self.mel.validate()?;
        let bad = |field, reason: String| Err(VocoderError::InvalidConfig { field, reason });
        for (field, v) in [
            ("n_q", self.n_q),
            ("codebook_size", self.codebook_size),
            ("dim", self.dim),
            ("intermediate_dim", self.intermediate_dim),
        ] {
            if v == 0 {
                return bad(field, "must be positive".into());
            }
        }
        if self.codec_hop == 0 || !self.codec_hop.is_multiple_of(self.mel.hop_length) {
            return bad(
                "codec_hop",
                format!(
                    "must be a positive multiple of the mel hop {}, got {}",
                    self.mel.hop_length, self.codec_hop
                ),
            );
        }
        if self.kernel_size.is_multiple_of(2) {
            return bad(
                "kernel_size",
                format!("must be odd, got {}", self.kernel_size),
            );
        }
        if !self.mel.center {
            return bad("mel", "the mel frames must be centred".into());
        }
        Ok(())
    }

    /// Builds the decoder on `device`.
    ///
    /// # Errors
    /// As [`MelDecoderConfig::validate`].
    pub fn init(&self, device: &Device) -> Result<MelDecoder, VocoderError> {
        self.validate()?;
        let (dim, u) = (self.dim, self.upsample());
        let block = || {
            ConvNextBlock::new(
                dim,
                self.intermediate_dim,
                self.kernel_size,
                1.0 / (self.n_code_blocks + self.n_mel_blocks).max(1) as f32,
                device,
            )
        };
        // Output length (T − 1)·u − 2p + k = T·u: k = 2u, p = u/2 for even u; k = u, p = 0 for odd.
        let (kernel, pad) = if u.is_multiple_of(2) {
            (2 * u, u / 2)
        } else {
            (u, 0)
        };
        Ok(MelDecoder {
            embeddings: (0..self.n_q)
                .map(|_| EmbeddingConfig::new(self.codebook_size, dim).init(device))
                .collect(),
            embed: Conv1dConfig::new(dim, dim, self.kernel_size)
                .with_padding(PaddingConfig1d::Explicit(
                    self.kernel_size / 2,
                    self.kernel_size / 2,
                ))
                .init(device),
            norm: LayerNormConfig::new(dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            code_blocks: (0..self.n_code_blocks).map(|_| block()).collect(),
            upsample: ConvTranspose1dConfig::new([dim, dim], kernel)
                .with_stride(u)
                .with_padding(pad)
                .init(device),
            mel_blocks: (0..self.n_mel_blocks).map(|_| block()).collect(),
            final_norm: LayerNormConfig::new(dim)
                .with_epsilon(NORM_EPSILON)
                .init(device),
            head: LinearConfig::new(dim, self.mel.n_mels).init(device),
            phone_embedding: (self.phone_vocab() > 0)
                .then(|| EmbeddingConfig::new(self.phone_vocab() + 1, dim).init(device)),
            codebook_size: self.codebook_size,
            upsample_factor: u,
        })
    }
}

/// Codes → log-mel (see the module documentation).
#[derive(Module, Debug)]
pub struct MelDecoder {
    /// One table per RVQ layer, `[codebook_size, dim]` each.
    pub embeddings: Vec<Embedding>,
    /// Input convolution at the code rate.
    pub embed: Conv1d,
    /// LayerNorm after it.
    pub norm: LayerNorm,
    /// ConvNeXt blocks at the code rate.
    pub code_blocks: Vec<ConvNextBlock>,
    /// Code rate → mel rate.
    pub upsample: ConvTranspose1d,
    /// ConvNeXt blocks at the mel rate.
    pub mel_blocks: Vec<ConvNextBlock>,
    /// LayerNorm before the head.
    pub final_norm: LayerNorm,
    /// `dim → n_mels`.
    pub head: Linear,
    /// `[phones + 1, dim]` for a decoder with a phone input.
    pub phone_embedding: Option<Embedding>,
    codebook_size: usize,
    upsample_factor: usize,
}

impl MelDecoder {
    /// RVQ layers read.
    pub fn n_q(&self) -> usize {
        self.embeddings.len()
    }

    /// Mel frames per code frame.
    pub fn upsample_factor(&self) -> usize {
        self.upsample_factor
    }

    /// Phone vocabulary of the phone input (0: the decoder reads codes alone).
    pub fn phones(&self) -> usize {
        self.phone_embedding
            .as_ref()
            .map_or(0, |e| e.weight.dims()[0] - 1)
    }

    /// [`Self::forward_with_phones`] without phones, for a decoder of codes alone.
    ///
    /// # Shapes
    /// - `codes`: `[n_q' ≥ n_q, batch, frames]`
    /// - output: `[batch, n_mels, frames · u]`
    ///
    /// # Errors
    /// As [`Self::forward_with_phones`].
    pub fn forward(&self, codes: Tensor<3, Int>) -> Result<Tensor<3>, VocoderError> {
        self.forward_with_phones(codes, None)
    }

    /// Predicts the log-mel of codes, told each frame's phone when the decoder has a phone
    /// input (phones given to a decoder without one are ignored). Layers past `n_q` are
    /// ignored; a code outside the codebook is an error.
    ///
    /// # Shapes
    /// - `codes`: `[n_q' ≥ n_q, batch, frames]`
    /// - `phones`: `[batch, frames]`, ids in `0..=phones` (`phones` = no phone)
    /// - output: `[batch, n_mels, frames · u]` (natural-log mel, `u` = [`Self::upsample_factor`])
    ///
    /// # Errors
    /// [`VocoderError::Shape`] for fewer layers than `n_q`, no frames, a code `≥
    /// codebook_size`, phones missing, of another shape or out of range.
    pub fn forward_with_phones(
        &self,
        codes: Tensor<3, Int>,
        phones: Option<Tensor<2, Int>>,
    ) -> Result<Tensor<3>, VocoderError> {
        let [layers, batch, frames] = codes.dims();
        let n_q = self.n_q();
        if layers < n_q || frames == 0 || batch == 0 {
            return Err(VocoderError::Shape {
                what: "mel decoder codes",
                expected: format!("[n_q >= {n_q}, batch >= 1, frames >= 1]"),
                found: vec![layers, batch, frames],
            });
        }
        let codes = codes.slice([0..n_q, 0..batch, 0..frames]);
        let largest = codes.clone().max().into_scalar::<i64>();
        let smallest = codes.clone().min().into_scalar::<i64>();
        if smallest < 0 || largest >= self.codebook_size as i64 {
            return Err(VocoderError::Shape {
                what: "mel decoder codes (values)",
                expected: format!("codes in 0..{}", self.codebook_size),
                found: vec![smallest.max(0) as usize, largest.max(0) as usize],
            });
        }
        let mut x: Option<Tensor<3>> = None; // [batch, frames, dim]
        for (q, table) in self.embeddings.iter().enumerate() {
            let layer = codes
                .clone()
                .slice([q..q + 1, 0..batch, 0..frames])
                .reshape([batch, frames]);
            let e = table.forward(layer);
            x = Some(match x {
                Some(sum) => sum + e,
                None => e,
            });
        }
        let mut x = x.ok_or(VocoderError::InvalidConfig {
            field: "n_q",
            reason: "the decoder reads no layer".into(),
        })?;
        if let Some(table) = &self.phone_embedding {
            let n = self.phones();
            let bad = |found: Vec<usize>, expected: String| VocoderError::Shape {
                what: "mel decoder phones",
                expected,
                found,
            };
            let phones = phones.ok_or_else(|| {
                bad(
                    vec![],
                    format!("[{batch}, {frames}] phone ids: the decoder reads the phones"),
                )
            })?;
            if phones.dims() != [batch, frames] {
                return Err(bad(phones.dims().to_vec(), format!("[{batch}, {frames}]")));
            }
            let largest = phones.clone().max().into_scalar::<i64>();
            let smallest = phones.clone().min().into_scalar::<i64>();
            if smallest < 0 || largest > n as i64 {
                return Err(bad(
                    vec![smallest.max(0) as usize, largest.max(0) as usize],
                    format!("phone ids in 0..={n}"),
                ));
            }
            x = x + table.forward(phones);
        }
        let x = x.swap_dims(1, 2); // [batch, dim, frames]
        let x = self.embed.forward(x);
        let x = self.norm.forward(x.swap_dims(1, 2)).swap_dims(1, 2);
        let x = self.code_blocks.iter().fold(x, |x, b| b.forward(x));
        let x = self.upsample.forward(x); // [batch, dim, frames · u]
        let x = self.mel_blocks.iter().fold(x, |x, b| b.forward(x));
        let x = self.final_norm.forward(x.swap_dims(1, 2)); // [batch, frames · u, dim]
        Ok(self.head.forward(x).swap_dims(1, 2)) // [batch, n_mels, frames · u]
    }
}
