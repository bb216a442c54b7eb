//! The data of a SpeechTokenizer-style codec: training utterances (audio at the codec's rate
//! and, for semantic distillation, teacher features brought to the codec's frames), and token
//! stores of a prepared corpus.

use std::collections::HashSet;
use std::path::Path;

use burn::tensor::{Device, Tensor, TensorData};
use rayon::prelude::*;
use voxspec_data::{Codes, Progress, TokenStore, TokenStoreWriter, Utterance};
use voxspec_teacher::FeatureStoreReader;

use super::train::CodecUtterance;
use super::{SpeechTokenizer, SpeechTokenizerConfig};
use crate::error::CodecError;
use crate::losses::resample_frames;

/// Teacher features of `id` from `store` brought to `frames` codec frames at `codec_rate`
/// frames per second: cut or padded with the last frame at equal rates, else linearly
/// interpolated. Returns the values `[frames, dim]` (row-major), `frames` and `dim`.
///
/// # Errors
/// [`CodecError::MissingFeatures`] when the store has none for `id`; the store's errors.
pub fn teacher_features_for(
    store: &FeatureStoreReader,
    id: &str,
    frames: usize,
    codec_rate: f32,
    device: &Device,
) -> Result<(Vec<f32>, usize, usize), CodecError> {
    let f = store
        .get(id)?
        .ok_or_else(|| CodecError::MissingFeatures { id: id.to_string() })?;
    let same_rate = (store.meta().frame_rate - codec_rate).abs() < 1e-3;
    let dim = f.dim;
    let values = if same_rate {
        // Equal rates: the counts differ by padding only; cut or repeat the last frame.
        let mut v = f.data;
        v.truncate(frames.min(f.frames) * dim);
        while v.len() < frames * dim && f.frames > 0 {
            let last = v[v.len() - dim..].to_vec();
            v.extend_from_slice(&last);
        }
        v
    } else {
        let t: Tensor<3> = Tensor::from_data(TensorData::new(f.data, [1, f.frames, dim]), device);
        resample_frames(t, frames)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| CodecError::TensorRead {
                what: "resampled teacher features",
                reason: format!("{id}: {e:?}"),
            })?
    };
    Ok((values, frames, dim))
}

/// The training utterances of a split, in memory, in parallel: audio at the codec's rate and,
/// with `features`, teacher features at the codec's frames ([`teacher_features_for`]); with
/// `codes`, the codes the decoder renders in their place ([`CodecUtterance::codes`]; a store of
/// the codec's own frame rate and `n_q`).
///
/// # Errors
/// [`CodecError::Audio`], [`CodecError::MissingFeatures`] or [`CodecError::FrameCount`]
/// naming the utterance; [`CodecError::InvalidInput`] for a code store of another shape.
pub fn load_codec_split(
    utterances: &[Utterance],
    config: &SpeechTokenizerConfig,
    features: Option<&FeatureStoreReader>,
    codes: Option<&TokenStore>,
    progress: &dyn Progress,
    what: &str,
    device: &Device,
) -> Result<Vec<CodecUtterance>, CodecError> {
    let rate = config.sample_rate;
    let hop = config.hop_length();
    let codec_rate = config.frame_rate();
    if let Some(store) = codes {
        let meta = store.meta();
        if meta.n_q != config.n_q
            || meta.codebook_size as usize != config.codebook_size
            || (meta.frame_rate - codec_rate).abs() > 1e-3
        {
            return Err(CodecError::InvalidInput {
                detail: format!(
                    "the code store holds {} × {} codes at {} Hz; the codec has {} × {} at {} Hz",
                    meta.n_q,
                    meta.codebook_size,
                    meta.frame_rate,
                    config.n_q,
                    config.codebook_size,
                    codec_rate
                ),
            });
        }
    }
    progress.start(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let samples = read_audio(u, rate)?;
            let teacher = features
                .map(|store| {
                    teacher_features_for(
                        store,
                        &u.id,
                        samples.len().div_ceil(hop),
                        codec_rate,
                        device,
                    )
                })
                .transpose()?;
            let codes = codes
                .map(|store| {
                    let c = store.get(&u.id).ok_or_else(|| CodecError::FrameCount {
                        id: u.id.clone(),
                        detail: "the code store has no codes for it".into(),
                    })?;
                    let frames = samples.len().div_ceil(hop);
                    if c.n_frames + 2 < frames || c.n_frames > frames + 2 {
                        return Err(CodecError::FrameCount {
                            id: u.id.clone(),
                            detail: format!(
                                "{} frames of codes for {frames} frames of audio",
                                c.n_frames
                            ),
                        });
                    }
                    Ok((c.data.clone(), c.n_frames))
                })
                .transpose()?;
            progress.inc(1);
            Ok(CodecUtterance {
                samples,
                teacher,
                codes,
            })
        })
        .collect::<Result<Vec<_>, CodecError>>();
    progress.finish();
    out
}

fn read_audio(u: &Utterance, rate: u32) -> Result<Vec<f32>, CodecError> {
    voxspec_audio::load_resampled(Path::new(&u.path), rate)
        .map(|a| a.samples)
        .map_err(|source| CodecError::Audio {
            id: u.id.clone(),
            source,
        })
}

/// Codes `[n_q, frames]` (stream-major) of one waveform, the first `n_q` RVQ layers.
///
/// # Errors
/// [`CodecError::InvalidInput`] for empty audio; the codec's errors.
pub fn encode_codes(
    model: &SpeechTokenizer,
    samples: &[f32],
    n_q: usize,
    device: &Device,
) -> Result<Codes, CodecError> {
    if samples.is_empty() {
        return Err(CodecError::InvalidInput {
            detail: "the audio is empty".into(),
        });
    }
    let wave: Tensor<3> = Tensor::from_data(
        TensorData::new(samples.to_vec(), [1, 1, samples.len()]),
        device,
    );
    let codes = model.encode(wave, n_q)?; // [n_q, 1, frames]
    let [q, _, frames] = codes.dims();
    let data = codes
        .into_data()
        .try_into_vec_as::<i64>()
        .map_err(|e| CodecError::TensorRead {
            what: "codes",
            reason: format!("{e:?}"),
        })?;
    let data = data
        .into_iter()
        .map(|c| {
            u32::try_from(c).map_err(|_| CodecError::InvalidInput {
                detail: format!("negative code {c}"),
            })
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(Codes::new(q, frames, data)?)
}

/// The metadata of a codes file (`voxspec_data::write_codes_file`) holding `samples` samples
/// encoded by a codec of `config`.
pub fn codes_meta(
    config: &SpeechTokenizerConfig,
    samples: usize,
) -> std::collections::HashMap<String, String> {
    std::collections::HashMap::from([
        ("sample_rate".to_string(), config.sample_rate.to_string()),
        ("frame_rate".to_string(), config.frame_rate().to_string()),
        ("hop".to_string(), config.hop_length().to_string()),
        (
            "codebook_size".to_string(),
            config.codebook_size.to_string(),
        ),
        ("samples".to_string(), samples.to_string()),
    ])
}

/// The waveform of `codes` (`[n_q, frames]` of a codes file, stream-major), decoded from its
/// first `n_q` RVQ layers.
///
/// # Errors
/// [`CodecError::InvalidInput`] when the codes do not fit the codec (more layers than it has,
/// no frame, a code outside the codebook); the codec's errors.
pub fn decode_codes(
    model: &SpeechTokenizer,
    config: &SpeechTokenizerConfig,
    (n_q, frames, data): (usize, usize, Vec<i64>),
    device: &Device,
) -> Result<Vec<f32>, CodecError> {
    if !(1..=model.n_q()).contains(&n_q) || frames == 0 {
        return Err(CodecError::InvalidInput {
            detail: format!(
                "codes [{n_q}, {frames}] do not fit the codec ({} RVQ layers)",
                model.n_q()
            ),
        });
    }
    let k = config.codebook_size as i64;
    if let Some(bad) = data.iter().find(|&&c| !(0..k).contains(&c)) {
        return Err(CodecError::InvalidInput {
            detail: format!("code {bad} is outside the codebook [0, {k})"),
        });
    }
    let codes =
        Tensor::<3, burn::tensor::Int>::from_data(TensorData::new(data, [n_q, 1, frames]), device); // [n_q, batch, frames]
    let wave = model.decode(codes)?; // [1, 1, frames · hop]
    wave.into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| CodecError::TensorRead {
            what: "waveform",
            reason: format!("{e:?}"),
        })
}

/// The codec's frame rule for utterance `u`: `ceil(samples / hop)` frames, and the manifest
/// duration must give the same count within one frame (duration rounding).
///
/// # Errors
/// [`CodecError::FrameCount`] naming the utterance.
pub fn check_frames(
    u: &Utterance,
    samples: usize,
    frames: usize,
    rate: u32,
    hop: usize,
) -> Result<(), CodecError> {
    let expected = samples.div_ceil(hop);
    if frames != expected {
        return Err(CodecError::FrameCount {
            id: u.id.clone(),
            detail: format!(
                "the codec produced {frames} frames for {samples} samples; expected \
                 ceil({samples} / {hop}) = {expected}"
            ),
        });
    }
    let from_duration = (u.duration * f64::from(rate) / hop as f64).ceil() as usize;
    if frames.abs_diff(from_duration) > 1 {
        return Err(CodecError::FrameCount {
            id: u.id.clone(),
            detail: format!(
                "{frames} frames ({samples} samples) do not match the manifest duration \
                 {:.3} s ({from_duration} frames at {} Hz); the manifest is stale or the file \
                 changed: rerun `voxspec prepare`",
                u.duration,
                rate as f32 / hop as f32
            ),
        });
    }
    Ok(())
}

/// Encodes every utterance of `utterances` not in `done` into `writer` (the first `n_q` RVQ
/// layers), reading audio in parallel batches of `batch`; every utterance's frames are checked
/// ([`check_frames`]). Returns the utterances and frames written.
///
/// # Errors
/// [`CodecError::Audio`], [`CodecError::FrameCount`] or [`CodecError::Utterance`] naming the
/// utterance; the store's errors.
#[allow(clippy::too_many_arguments)]
pub fn extract_codes(
    model: &SpeechTokenizer,
    config: &SpeechTokenizerConfig,
    utterances: &[Utterance],
    (n_q, batch): (usize, usize),
    done: &HashSet<String>,
    writer: &mut TokenStoreWriter,
    progress: &dyn Progress,
    device: &Device,
) -> Result<(usize, usize), CodecError> {
    let rate = config.sample_rate;
    let hop = config.hop_length();
    let todo: Vec<&Utterance> = utterances
        .iter()
        .filter(|u| !done.contains(&u.id))
        .collect();
    let mut frames = 0usize;
    for chunk in todo.chunks(batch.max(1)) {
        let waves = chunk
            .par_iter()
            .map(|u| read_audio(u, rate))
            .collect::<Result<Vec<_>, _>>()?;
        for (u, wave) in chunk.iter().zip(&waves) {
            let codes = encode_codes(model, wave, n_q, device).map_err(|e| e.of(&u.id))?;
            check_frames(u, wave.len(), codes.n_frames, rate, hop)?;
            frames += codes.n_frames;
            writer.push(&u.id, codes)?;
            progress.inc(1);
        }
    }
    Ok((todo.len(), frames))
}
