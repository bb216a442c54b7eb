//! Host-side use of a trained [`SoCodec`]: features in, stream tokens out; tokens (any prefix
//! of the streams) and a reference recording in, log-mel out; log-mel to waveform through the
//! vocoder ([`MelToWave`], Griffin-Lim only as the fallback).

use std::path::Path;

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_audio::MelConfig;

use super::{SoCodec, SoCodecConfig};
use crate::error::{CodecError, VocoderError};
use crate::vocoder::{GriffinLimConfig, Vocoder, griffin_lim_from_log_mel};

fn read_f32(t: Tensor<3>, what: &'static str) -> Result<Vec<f32>, CodecError> {
    t.into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| CodecError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}

impl SoCodec {
    /// Stream tokens of one utterance's raw (unstandardised) features.
    ///
    /// The features are standardised with `config`'s statistics and padded (with the mean) to
    /// a whole number of token frames, so an utterance of `n` feature frames gives
    /// `⌈n / ratio⌉` tokens per stream.
    ///
    /// # Shapes
    /// - `features`: `[frames, feature_dim]` row-major → `[streams][⌈frames / ratio⌉]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] for a width other than `config.feature_dim` or no frames.
    pub fn encode_features(
        &self,
        config: &SoCodecConfig,
        features: &[f32],
        device: &Device,
    ) -> Result<Vec<Vec<u32>>, CodecError> {
        let f = config.feature_dim;
        if features.is_empty() || !features.len().is_multiple_of(f) {
            return Err(CodecError::QuantizerShape {
                what: "SoCodec input features [frames, feature_dim]",
                expected: vec![features.len().div_ceil(f).max(1), f],
                found: vec![features.len()],
            });
        }
        let frames = features.len() / f;
        let r = self.ratio();
        let padded = frames.div_ceil(r) * r;
        let mut x = features.to_vec();
        config.normalize(&mut x);
        x.resize(padded * f, 0.0);
        // [frames, f] → [1, f, frames]
        let t = Tensor::<2>::from_data(TensorData::new(x, [padded, f]), device)
            .swap_dims(0, 1)
            .reshape([1, f, padded]);
        let tokens = self.encode(t)?; // [streams, 1, tokens]
        let [s, _, n] = tokens.dims();
        let v =
            tokens
                .into_data()
                .try_into_vec_as::<i64>()
                .map_err(|e| CodecError::TensorRead {
                    what: "SoCodec tokens",
                    reason: format!("{e:?}"),
                })?;
        Ok((0..s)
            .map(|i| v[i * n..(i + 1) * n].iter().map(|&u| u as u32).collect())
            .collect())
    }

    /// The voice vector of a reference recording at `config.mel.sample_rate`.
    ///
    /// # Shapes
    /// - `samples`: `[n]` → `[1, D]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] when the recording is shorter than the clip window
    /// (`config.clip_frames` mel frames).
    pub fn voice(
        &self,
        config: &SoCodecConfig,
        samples: &[f32],
        device: &Device,
    ) -> Result<Tensor<2>, CodecError> {
        let front = config.log_mel()?;
        let mut mel = front.compute(samples); // [frames, n_mels]
        config.normalize_mel(&mut mel);
        let n = config.mel.n_mels;
        let frames = mel.len() / n;
        let t = Tensor::<2>::from_data(TensorData::new(mel, [frames, n]), device)
            .swap_dims(0, 1)
            .reshape([1, n, frames]);
        self.global_vector(t)
    }

    /// The first `keep` streams of a codes file's tokens (`data`: `[n_q, frames]` row-major,
    /// read from `source`, named in errors), checked against this codec.
    ///
    /// # Shapes
    /// - `data`: `[n_q · frames]` → `[keep][frames]`
    ///
    /// # Errors
    /// [`CodecError::InvalidInput`] for more streams than the codec has, no frames, a token
    /// outside a stream's vocabulary, or `keep` outside `1..=n_q`.
    pub fn stream_tokens(
        &self,
        source: &std::path::Path,
        (n_q, frames): (usize, usize),
        data: &[i64],
        keep: usize,
    ) -> Result<Vec<Vec<u32>>, CodecError> {
        let invalid = |detail: String| CodecError::InvalidInput { detail };
        if !(1..=self.n_streams()).contains(&n_q) || frames == 0 || data.len() != n_q * frames {
            return Err(invalid(format!(
                "{}: tokens [{n_q}, {frames}] do not fit the codec ({} streams)",
                source.display(),
                self.n_streams()
            )));
        }
        let vocab = self.stream_vocab() as i64;
        if let Some(bad) = data.iter().find(|&&c| !(0..vocab).contains(&c)) {
            return Err(invalid(format!(
                "{}: token {bad} is outside a stream's vocabulary [0, {vocab})",
                source.display()
            )));
        }
        if !(1..=n_q).contains(&keep) {
            return Err(invalid(format!(
                "{}: {keep} streams asked for; the file holds streams 1..={n_q}",
                source.display()
            )));
        }
        Ok((0..keep)
            .map(|s| {
                data[s * frames..(s + 1) * frames]
                    .iter()
                    .map(|&u| u as u32)
                    .collect()
            })
            .collect())
    }

    /// Log-mel of stream tokens (the first `b` streams, `b = tokens.len()`) with a voice, in
    /// the front end's units (the config's band statistics undone).
    ///
    /// # Shapes
    /// - `tokens`: `[b][frames]` (equal lengths), `global`: `[1, D]` → `[frames · ratio · m,
    ///   n_mels]` row-major, returned with its frame count
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] for ragged or empty streams; as [`SoCodec::decode`] for
    /// a bad stream count or a token out of range.
    pub fn decode_tokens(
        &self,
        config: &SoCodecConfig,
        tokens: &[Vec<u32>],
        global: Tensor<2>,
        device: &Device,
    ) -> Result<(Vec<f32>, usize), CodecError> {
        let b = tokens.len();
        let t = tokens.first().map_or(0, Vec::len);
        if b == 0 || t == 0 || tokens.iter().any(|s| s.len() != t) {
            return Err(CodecError::QuantizerShape {
                what: "SoCodec tokens [streams, frames] (equal, non-empty streams)",
                expected: vec![b.max(1), t.max(1)],
                found: tokens.iter().map(Vec::len).collect(),
            });
        }
        let flat: Vec<i64> = tokens.iter().flatten().map(|&u| i64::from(u)).collect();
        let codes = Tensor::<3, Int>::from_data(TensorData::new(flat, [b, 1, t]), device);
        let mel = self.decode(codes, global)?; // [1, n_mels, frames]
        let [_, n, frames] = mel.dims();
        let rows = mel
            .reshape([n, frames])
            .swap_dims(0, 1)
            .reshape([1, frames, n]);
        let mut mel = read_f32(rows, "SoCodec log-mel")?;
        config.denormalize_mel(&mut mel);
        Ok((mel, frames))
    }
}

/// Log-mel → waveform: the trained vocoder, or Griffin-Lim as the fallback.
pub enum MelToWave {
    /// A Vocos-style vocoder.
    Vocoder(Box<Vocoder>),
    /// Griffin-Lim on the pseudo-inverted mel (no training; buzzy).
    GriffinLim(MelConfig),
}

impl MelToWave {
    /// The vocoder in the directory `vocoder` (Griffin-Lim for `None`), checked against a
    /// codec's log-mel `mel`.
    ///
    /// # Errors
    /// [`CodecError::VocoderLoad`] and [`CodecError::VocoderMel`] naming the directory.
    pub fn load(
        vocoder: Option<&Path>,
        mel: &MelConfig,
        device: &Device,
    ) -> Result<Self, CodecError> {
        let Some(dir) = vocoder else {
            return Ok(Self::GriffinLim(*mel));
        };
        let v = Vocoder::load(dir, device).map_err(|e| CodecError::VocoderLoad {
            dir: dir.to_path_buf(),
            source: Box::new(e),
        })?;
        let r = Self::Vocoder(Box::new(v));
        r.check(mel).map_err(|source| CodecError::VocoderMel {
            dir: dir.to_path_buf(),
            source: Box::new(source),
        })?;
        Ok(r)
    }

    /// The mel settings its input must have.
    pub fn mel_config(&self) -> MelConfig {
        match self {
            Self::Vocoder(v) => v.config().mel_config(),
            Self::GriffinLim(m) => *m,
        }
    }

    /// Checks that a codec's log-mel is this renderer's input.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] naming both settings when they differ.
    pub fn check(&self, codec_mel: &MelConfig) -> Result<(), VocoderError> {
        let mine = self.mel_config();
        if mine != *codec_mel {
            return Err(VocoderError::InvalidConfig {
                field: "mel",
                reason: format!(
                    "the codec predicts {codec_mel:?} but the vocoder takes {mine:?}; train a \
                     vocoder with the codec's mel settings"
                ),
            });
        }
        Ok(())
    }

    /// A waveform of `frames · hop` samples (Griffin-Lim: `(frames − 1) · hop`).
    ///
    /// # Shapes
    /// - `log_mel`: `[frames, n_mels]` row-major → `[samples]`
    ///
    /// # Errors
    /// On a shape the renderer cannot take.
    pub fn render(&self, log_mel: &[f32], frames: usize) -> Result<Vec<f32>, VocoderError> {
        match self {
            Self::Vocoder(v) => v.synthesize(log_mel, v.config().n_mels, frames),
            Self::GriffinLim(mel) => {
                Ok(
                    griffin_lim_from_log_mel(mel, log_mel, frames, &GriffinLimConfig::default())?
                        .wave,
                )
            }
        }
    }
}
