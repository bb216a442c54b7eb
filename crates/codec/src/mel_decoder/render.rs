//! Codes → samples through a loaded mel decoder and a renderer: the vocoder whose front end the
//! decoder predicts, or Griffin-Lim on the same mel settings.

use std::path::Path;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::model::{MelDecoder, MelDecoderConfig};
use super::train::load_mel_decoder;
use crate::error::VocoderError;
use crate::vocoder::{GriffinLimConfig, Vocoder, griffin_lim_from_log_mel};

/// What turns the predicted log-mel into samples.
#[derive(Debug)]
pub enum MelRenderer {
    /// A trained vocoder with the decoder's mel front end.
    Vocoder(Box<Vocoder>),
    /// Griffin-Lim on the pseudo-inverted mel.
    GriffinLim(GriffinLimConfig),
}

impl MelRenderer {
    /// `vocoder` or `Griffin-Lim`, for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Vocoder(_) => "vocoder",
            Self::GriffinLim(_) => "Griffin-Lim",
        }
    }
}

/// A mel decoder and its renderer on one device: codes in, samples out.
#[derive(Debug)]
pub struct MelSpeech {
    config: MelDecoderConfig,
    model: MelDecoder,
    renderer: MelRenderer,
    device: Device,
}

impl MelSpeech {
    /// Wraps a decoder and a renderer.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] when the vocoder takes another log-mel than the decoder
    /// predicts.
    pub fn new(
        config: MelDecoderConfig,
        model: MelDecoder,
        renderer: MelRenderer,
        device: &Device,
    ) -> Result<Self, VocoderError> {
        if let MelRenderer::Vocoder(v) = &renderer
            && !config.fits(v.config())
        {
            return Err(VocoderError::InvalidConfig {
                field: "mel",
                reason: format!(
                    "the vocoder takes {:?} but the mel decoder predicts {:?}",
                    v.config().mel_config(),
                    config.mel
                ),
            });
        }
        Ok(Self {
            config,
            model,
            renderer,
            device: device.clone(),
        })
    }

    /// Loads a mel decoder directory (`voxspec codec train-mel` output) and the vocoder in
    /// `vocoder`, or Griffin-Lim when `vocoder` is `None`.
    ///
    /// # Errors
    /// The training crate's errors naming the file; a vocoder of another mel front end.
    pub fn load(
        dir: &Path,
        vocoder: Option<&Path>,
        device: &Device,
    ) -> voxspec_train::Result<Self> {
        let (config, model) = load_mel_decoder(dir, device)?;
        let renderer = match vocoder {
            Some(v) => MelRenderer::Vocoder(Box::new(Vocoder::load(v, device)?)),
            None => MelRenderer::GriffinLim(GriffinLimConfig::default()),
        };
        Self::new(config, model, renderer, device).map_err(voxspec_train::TrainError::task)
    }

    /// The decoder's configuration.
    pub fn config(&self) -> &MelDecoderConfig {
        &self.config
    }

    /// The sample rate of the output.
    pub fn sample_rate(&self) -> u32 {
        self.config.mel.sample_rate
    }

    /// RVQ layers the decoder reads (the first `n_q`; later layers are ignored).
    pub fn n_q(&self) -> usize {
        self.model.n_q()
    }

    /// Phone vocabulary of the decoder's phone input; 0 when it reads codes alone.
    pub fn phones(&self) -> usize {
        self.config.phone_vocab()
    }

    /// The phone id of each of `frames` frames of `text` spoken for `durations` frames per
    /// token, as the decoder's phone input takes them ([`MelDecoderConfig::frame_phones`]).
    pub fn frame_phones(&self, text: &[u32], durations: &[u32], frames: usize) -> Vec<u32> {
        self.config.frame_phones(text, durations, frames)
    }

    /// The decoder network.
    pub fn model(&self) -> &MelDecoder {
        &self.model
    }

    /// The renderer.
    pub fn renderer(&self) -> &MelRenderer {
        &self.renderer
    }

    /// Code frames on either side of a span that the span's samples depend on, when the
    /// renderer is a vocoder: rendering a window that reaches this far past the span on each
    /// side (or to the utterance's edge) gives the span the samples a render of the whole
    /// utterance gives it, so a stream can render chunk by chunk. `None` for Griffin-Lim,
    /// whose iterations tie every frame to every other.
    pub fn context_frames(&self) -> Option<usize> {
        let MelRenderer::Vocoder(vocoder) = &self.renderer else {
            return None;
        };
        let (c, v) = (&self.config, vocoder.config());
        // Code rate: the input convolution and the code blocks, then one frame for the
        // transposed convolution's overlap.
        let code = c.kernel_size / 2 * (1 + c.n_code_blocks) + 1;
        // Mel rate: the mel blocks, the vocoder's embedding and blocks, and the iSTFT window;
        // each phase refinement iteration (an iSTFT, then an STFT) reaches one window further.
        let refinement = vocoder.phase_refinement().iterations;
        let mel = c.kernel_size / 2 * c.n_mel_blocks
            + v.kernel_size / 2 * (1 + v.n_layers)
            + v.n_fft.div_ceil(2 * v.hop_length)
            + refinement * v.n_fft.div_ceil(v.hop_length);
        Some(code + mel.div_ceil(c.upsample().max(1)))
    }

    /// Samples of frames `from..to` of `codes` (`(to − from) · codec_hop`; `phones` of the
    /// same frames), rendered from the codes of the whole window: with
    /// [`Self::context_frames`] of codes on either side of the span (or the utterance's edge)
    /// they equal those of [`Self::synthesize`] over the whole utterance.
    ///
    /// # Errors
    /// [`VocoderError::Shape`] for a span outside the codes; as [`Self::synthesize`].
    pub fn synthesize_span(
        &self,
        codes: &[Vec<u32>],
        phones: Option<&[u32]>,
        from: usize,
        to: usize,
    ) -> Result<Vec<f32>, VocoderError> {
        let frames = codes.first().map_or(0, Vec::len);
        if from > to || to > frames {
            return Err(VocoderError::Shape {
                what: "mel decoder span (frames from..to of the window)",
                expected: format!("from <= to <= {frames}"),
                found: vec![from, to],
            });
        }
        if from == to {
            return Ok(Vec::new());
        }
        let hop = self.config.codec_hop;
        let wave = self.synthesize(codes, phones)?;
        Ok(wave[from * hop..to * hop].to_vec())
    }

    /// The predicted log-mel of `codes`, told each frame's phone by `phones` when the decoder
    /// has a phone input (ignored otherwise).
    ///
    /// # Shapes
    /// `codes: [n_q' ≥ n_q][frames]`, `phones: [frames]` → (`[frames · u, n_mels]` row-major,
    /// frame-major; `frames · u`)
    ///
    /// # Errors
    /// As [`MelDecoder::forward_with_phones`]; [`VocoderError::Shape`] for ragged layers or
    /// phones of another length.
    pub fn log_mel(
        &self,
        codes: &[Vec<u32>],
        phones: Option<&[u32]>,
    ) -> Result<(Vec<f32>, usize), VocoderError> {
        let frames = codes.first().map_or(0, Vec::len);
        if codes.iter().any(|row| row.len() != frames) {
            return Err(VocoderError::Shape {
                what: "codes [n_q][frames]",
                expected: format!("{} layers of {frames} frames", codes.len()),
                found: codes.iter().map(Vec::len).collect(),
            });
        }
        let phones = match (self.config.phone_vocab(), phones) {
            (0, _) | (_, None) => None,
            (_, Some(p)) if p.len() != frames => {
                return Err(VocoderError::Shape {
                    what: "mel decoder phones [frames]",
                    expected: format!("{frames} phones"),
                    found: vec![p.len()],
                });
            }
            (_, Some(p)) => {
                let ids: Vec<i64> = p.iter().map(|&id| i64::from(id)).collect();
                Some(Tensor::<2, Int>::from_data(
                    TensorData::new(ids, [1, frames]),
                    &self.device,
                ))
            }
        };
        let n_q = codes.len().min(self.model.n_q());
        let flat: Vec<i64> = codes[..n_q]
            .iter()
            .flat_map(|row| row.iter().map(|&c| i64::from(c)))
            .collect();
        let x: Tensor<3, Int> =
            Tensor::from_data(TensorData::new(flat, [n_q, 1, frames]), &self.device);
        let mel = self.model.forward_with_phones(x, phones)?; // [1, n_mels, F]
        let [_, n_mels, mel_frames] = mel.dims();
        let mel = mel
            .reshape([n_mels, mel_frames])
            .swap_dims(0, 1) // [F, n_mels]
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| VocoderError::TensorRead {
                what: "mel decoder log-mel",
                reason: format!("{e:?}"),
            })?;
        Ok((mel, mel_frames))
    }

    /// Samples of `codes` (and, for a decoder with a phone input, `phones`: one per frame):
    /// `frames · codec_hop` at [`Self::sample_rate`].
    ///
    /// # Errors
    /// As [`MelSpeech::log_mel`], the vocoder and Griffin-Lim.
    pub fn synthesize(
        &self,
        codes: &[Vec<u32>],
        phones: Option<&[u32]>,
    ) -> Result<Vec<f32>, VocoderError> {
        let (mel, mel_frames) = self.log_mel(codes, phones)?;
        let n_mels = self.config.mel.n_mels;
        let len = mel_frames * self.config.mel.hop_length;
        let mut wave = match &self.renderer {
            MelRenderer::Vocoder(v) => v.synthesize(&mel, n_mels, mel_frames)?,
            MelRenderer::GriffinLim(gl) => {
                griffin_lim_from_log_mel(&self.config.mel, &mel, mel_frames, gl)?.wave
            }
        };
        wave.resize(len, 0.0);
        Ok(wave)
    }
}
