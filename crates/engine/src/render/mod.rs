//! The renderer of codes as samples — the mel decoder and its Vocos vocoder
//! (`voxspec_codec::MelSpeech`) — on the engine's kernels.
//!
//! ```text
//! codes [n_q][frames] (+ phones [frames])
//!   └ NativeMelDecoder: embeddings ─ conv ─ LN ─ ConvNeXt × n ─ transposed conv ─ ConvNeXt × m
//!                       ─ LN ─ head                          log-mel [frames · u, n_mels]
//!   └ NativeVocoder:    conv ─ LN ─ ConvNeXt × n ─ LN ─ head ─ (|X|, φ) ─ iSTFT (FFT)
//!                                                             samples [frames · codec_hop]
//! ```
//!
//! Activations are frame-major (`[frames, channels]`), so every pointwise layer and the
//! unfolded convolutions are one packed product over all the frames (`PackedLinear`, split
//! over the engine's threads, AMX tiles for bf16 weights where the CPU has them), depthwise
//! convolutions, layer norms and GELU run vectorised across the channels, and the inverse STFT
//! is an FFT per frame instead of Burn's `[2 · n_bins × n_fft]` overlap-add convolution.
//! Parity with `MelSpeech` is tested in `tests/render_parity.rs`.

mod layers;
mod mel_decoder;
mod vocoder;

pub use mel_decoder::NativeMelDecoder;
pub use vocoder::NativeVocoder;

use voxspec_codec::MelSpeech;
use voxspec_codec::mel_decoder::MelRenderer;

use crate::error::{EngineError, Result};
use crate::matmul::WeightFormat;

/// A mel decoder and its vocoder on the native engine: codes in, samples out.
#[derive(Debug, Clone)]
pub struct NativeMelSpeech {
    decoder: NativeMelDecoder,
    vocoder: NativeVocoder,
    codec_hop: usize,
    format: WeightFormat,
}

impl NativeMelSpeech {
    /// Copies a loaded [`MelSpeech`] whose renderer is a vocoder, linear and convolution
    /// weights stored as `format` (embeddings, norms and biases stay f32).
    ///
    /// # Errors
    /// [`EngineError::Model`] for Griffin-Lim or a phase-refining vocoder (they run on Burn)
    /// or a layer the engine does not run; [`EngineError::Parameter`] when a tensor cannot be
    /// read.
    pub fn from_burn(mel: &MelSpeech, format: WeightFormat) -> Result<Self> {
        let MelRenderer::Vocoder(vocoder) = mel.renderer() else {
            return Err(EngineError::Model {
                detail: format!(
                    "a mel decoder rendered by {} runs on Burn",
                    mel.renderer().name()
                ),
            });
        };
        let decoder = NativeMelDecoder::from_burn(mel.model(), mel.config(), format)?;
        let vocoder = NativeVocoder::from_burn(vocoder, format)?;
        if vocoder.n_mels() != decoder.n_mels() {
            return Err(EngineError::Model {
                detail: format!(
                    "the vocoder takes {} mel bands, the mel decoder predicts {}",
                    vocoder.n_mels(),
                    decoder.n_mels()
                ),
            });
        }
        Ok(Self {
            decoder,
            vocoder,
            codec_hop: mel.config().codec_hop,
            format,
        })
    }

    /// Whether the engine runs `mel`: its renderer is a vocoder without phase refinement.
    pub fn runs(mel: &MelSpeech) -> bool {
        matches!(mel.renderer(), MelRenderer::Vocoder(v) if v.phase_refinement().iterations == 0)
    }

    /// How the linear and convolution weights are stored.
    pub fn weight_format(&self) -> WeightFormat {
        self.format
    }

    /// The mel decoder.
    pub fn decoder(&self) -> &NativeMelDecoder {
        &self.decoder
    }

    /// The vocoder.
    pub fn vocoder(&self) -> &NativeVocoder {
        &self.vocoder
    }

    /// Samples of `codes` (and, for a decoder with a phone input, `phones`: one per frame),
    /// as `MelSpeech::synthesize` gives them.
    ///
    /// # Shapes
    /// `codes: [n_q' ≥ n_q][frames]`, `phones: [frames]` → `[frames · codec_hop]`
    ///
    /// # Errors
    /// As [`NativeMelDecoder::log_mel`].
    pub fn synthesize(&self, codes: &[Vec<u32>], phones: Option<&[u32]>) -> Result<Vec<f32>> {
        let (mel, mel_frames) = self.decoder.log_mel(codes, phones)?;
        let mut wave = self.vocoder.synthesize(&mel, mel_frames)?;
        wave.resize(mel_frames * self.vocoder.hop_length(), 0.0);
        Ok(wave)
    }

    /// Samples of frames `from..to` of the window `codes`, rendered from the whole window (as
    /// `MelSpeech::synthesize_span`).
    ///
    /// # Errors
    /// [`EngineError::Input`] for a span outside the codes; as [`Self::synthesize`].
    pub fn synthesize_span(
        &self,
        codes: &[Vec<u32>],
        phones: Option<&[u32]>,
        from: usize,
        to: usize,
    ) -> Result<Vec<f32>> {
        let frames = codes.first().map_or(0, Vec::len);
        if from > to || to > frames {
            return Err(EngineError::Input {
                detail: format!("mel decoder span {from}..{to} outside the {frames} frames"),
            });
        }
        if from == to {
            return Ok(Vec::new());
        }
        let wave = self.synthesize(codes, phones)?;
        Ok(wave[from * self.codec_hop..to * self.codec_hop].to_vec())
    }
}
