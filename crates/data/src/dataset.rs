//! Burn datasets and batchers for the two kinds of training pairs:
//!
//! - (text tokens, codec codes) for language models: [`TtsDataset`] → [`TtsBatcher`] → [`TtsBatch`];
//! - (audio, text tokens) for codecs and semantic teachers: [`AudioTextDataset`] →
//!   [`AudioTextBatcher`] → [`AudioTextBatch`].
//!
//! Batches are padded to their longest item; masks are `true` on real positions and `false` on
//! padding. Use [`crate::bucket::bucket_batches`] with [`TtsDataset::lengths`] or
//! [`AudioTextDataset::lengths`] to form batches of similar lengths.

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::tensor::{Bool, Device, Int, Tensor, TensorData};

use crate::durations::alignment_frames;
use crate::error::{DataError, Result};
use crate::manifest::Utterance;
use crate::text::TextTokenizer;
use crate::token_store::{Codes, TokenStore};

/// What to do with a manifest utterance that has no codes in the token store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingCodes {
    /// Refuse to build the dataset, naming the utterance.
    Error,
    /// Leave it out (logged as a warning with the count).
    Skip,
}

/// One (text, codes) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct TtsItem {
    /// Utterance id.
    pub id: String,
    /// Speaker id.
    pub speaker: String,
    /// Text token ids (no BOS/EOS).
    pub text: Vec<u32>,
    /// Codec codes `[n_q, T]`.
    pub codes: Codes,
    /// Frames of each text token (from a forced alignment; sums to `T`), when known.
    pub durations: Option<Vec<u32>>,
}

/// Text tokens joined with codec codes by utterance id, held in memory.
#[derive(Debug, Clone)]
pub struct TtsDataset {
    items: Vec<TtsItem>,
}

impl TtsDataset {
    /// Tokenises every transcript and joins it with its codes. With a phonemic tokenizer, an
    /// utterance that carries a phone alignment is taken as its aligned phones with their
    /// durations in codec frames ([`alignment_frames`]).
    pub fn new(
        utterances: &[Utterance],
        tokenizer: &TextTokenizer,
        store: &TokenStore,
        missing: MissingCodes,
    ) -> Result<Self> {
        let mut items = Vec::with_capacity(utterances.len());
        let mut skipped = 0usize;
        let mut misaligned = 0usize;
        let frame_rate = store.meta().frame_rate;
        for u in utterances {
            let Some(codes) = store.get(&u.id) else {
                match missing {
                    MissingCodes::Error => {
                        return Err(DataError::MissingCodes {
                            id: u.id.clone(),
                            store: store.dir().to_path_buf(),
                        });
                    }
                    MissingCodes::Skip => {
                        skipped += 1;
                        continue;
                    }
                }
            };
            // A phonemic tokenizer with a forced alignment: the text is the aligned phones and
            // each lasts the frames the alignment gives it (an aligned AR model's input).
            let aligned = match (&u.alignment, tokenizer.is_phonemic()) {
                (Some(a), true) => {
                    match alignment_frames(&a.ends, f64::from(frame_rate), codes.n_frames) {
                        Ok(d) => Some((tokenizer.encode_phones(&a.phones)?, d)),
                        Err(detail) => {
                            tracing::warn!(id = %u.id, %detail, "alignment not used");
                            misaligned += 1;
                            None
                        }
                    }
                }
                _ => None,
            };
            let (text, durations) = match aligned {
                Some((text, d)) => (text, Some(d)),
                None => {
                    let text = tokenizer.encode(&u.text).map_err(|e| match e {
                        DataError::Text { detail, .. } => DataError::Text {
                            id: u.id.clone(),
                            detail,
                        },
                        other => other,
                    })?;
                    (text, None)
                }
            };
            items.push(TtsItem {
                id: u.id.clone(),
                speaker: u.speaker.clone(),
                text,
                codes: codes.clone(),
                durations,
            });
        }
        if misaligned > 0 {
            tracing::warn!(
                misaligned,
                "utterances whose alignment does not match their codes were taken without one"
            );
        }
        if skipped > 0 {
            tracing::warn!(skipped, store = %store.dir().display(), "utterances without codes left out");
        }
        Ok(TtsDataset { items })
    }

    /// Builds a dataset from ready items.
    pub fn from_items(items: Vec<TtsItem>) -> Self {
        TtsDataset { items }
    }

    /// Code frames per item (the length to bucket on).
    pub fn lengths(&self) -> Vec<usize> {
        self.items.iter().map(|i| i.codes.n_frames).collect()
    }
}

impl Dataset<TtsItem, DataError> for TtsDataset {
    fn get(&self, index: usize) -> Result<TtsItem> {
        self.items.get(index).cloned().ok_or(DataError::OutOfRange {
            index,
            len: self.items.len(),
        })
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// A padded batch of (text, codes) pairs.
#[derive(Debug, Clone)]
pub struct TtsBatch {
    /// Utterance ids, in batch order.
    pub ids: Vec<String>,
    /// Text tokens `[batch, text_len]`, padded with the batcher's `text_pad`.
    pub text: Tensor<2, Int>,
    /// `[batch, text_len]`, true on real tokens.
    pub text_mask: Tensor<2, Bool>,
    /// Real text length of each item.
    pub text_lengths: Vec<usize>,
    /// Codes `[batch, n_q, frames]`, padded with the batcher's `code_pad`.
    pub codes: Tensor<3, Int>,
    /// `[batch, frames]`, true on real frames.
    pub code_mask: Tensor<2, Bool>,
    /// Real frame count of each item.
    pub code_lengths: Vec<usize>,
}

/// Pads (text, codes) items into a [`TtsBatch`].
#[derive(Debug, Clone, Copy)]
pub struct TtsBatcher {
    /// Padding value for text tokens (usually `<pad>` = 0).
    pub text_pad: u32,
    /// Padding value for codes (models usually reserve an id past the codebook).
    pub code_pad: u32,
}

/// Pads rows to `width` with `pad`; returns the flat `[rows, width]` data and the mask.
fn pad_rows<T: Copy>(rows: &[&[T]], width: usize, pad: T) -> (Vec<T>, Vec<bool>) {
    let mut data = Vec::with_capacity(rows.len() * width);
    let mut mask = Vec::with_capacity(rows.len() * width);
    for r in rows {
        data.extend_from_slice(r);
        data.extend(std::iter::repeat_n(pad, width - r.len()));
        mask.extend(std::iter::repeat_n(true, r.len()));
        mask.extend(std::iter::repeat_n(false, width - r.len()));
    }
    (data, mask)
}

fn int_tensor<const D: usize>(
    values: Vec<u32>,
    shape: [usize; D],
    device: &Device,
) -> Tensor<D, Int> {
    let values: Vec<i64> = values.into_iter().map(i64::from).collect();
    Tensor::from_data(TensorData::new(values, shape), device)
}

fn bool_tensor(values: Vec<bool>, shape: [usize; 2], device: &Device) -> Tensor<2, Bool> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

impl Batcher<TtsItem, TtsBatch> for TtsBatcher {
    /// # Panics
    /// If items disagree on `n_q` (they come from one token store, which guarantees it).
    fn batch(&self, items: Vec<TtsItem>, device: &Device) -> TtsBatch {
        let b = items.len();
        let n_q = items.first().map_or(1, |i| i.codes.n_q);
        assert!(
            items.iter().all(|i| i.codes.n_q == n_q),
            "items of one batch must share n_q"
        );
        let text_lengths: Vec<usize> = items.iter().map(|i| i.text.len()).collect();
        let code_lengths: Vec<usize> = items.iter().map(|i| i.codes.n_frames).collect();
        let lt = text_lengths.iter().copied().max().unwrap_or(0).max(1);
        let lc = code_lengths.iter().copied().max().unwrap_or(0).max(1);

        let texts: Vec<&[u32]> = items.iter().map(|i| i.text.as_slice()).collect();
        let (text, text_mask) = pad_rows(&texts, lt, self.text_pad);
        let streams: Vec<&[u32]> = items
            .iter()
            .flat_map(|i| (0..n_q).map(move |q| i.codes.stream(q)))
            .collect();
        let (codes, _) = pad_rows(&streams, lc, self.code_pad);
        let frames: Vec<&[u32]> = items.iter().map(|i| i.codes.stream(0)).collect();
        let (_, code_mask) = pad_rows(&frames, lc, 0);

        TtsBatch {
            ids: items.iter().map(|i| i.id.clone()).collect(),
            text: int_tensor(text, [b, lt], device),
            text_mask: bool_tensor(text_mask, [b, lt], device),
            text_lengths,
            codes: int_tensor(codes, [b, n_q, lc], device),
            code_mask: bool_tensor(code_mask, [b, lc], device),
            code_lengths,
        }
    }
}

/// One (audio, text) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioTextItem {
    /// Utterance id.
    pub id: String,
    /// Speaker id.
    pub speaker: String,
    /// Mono waveform at the dataset's sample rate.
    pub audio: Vec<f32>,
    /// Text token ids.
    pub text: Vec<u32>,
}

/// Utterances whose audio is decoded (and resampled) on access; text is tokenised up front.
#[derive(Debug, Clone)]
pub struct AudioTextDataset {
    utterances: Vec<Utterance>,
    texts: Vec<Vec<u32>>,
    sample_rate: u32,
}

impl AudioTextDataset {
    /// Tokenises every transcript now; audio is read by [`Dataset::get`].
    pub fn new(
        utterances: Vec<Utterance>,
        tokenizer: &TextTokenizer,
        sample_rate: u32,
    ) -> Result<Self> {
        if sample_rate == 0 {
            return Err(DataError::Config {
                field: "sample_rate",
                detail: "must be positive".into(),
            });
        }
        let texts = utterances
            .iter()
            .map(|u| {
                tokenizer.encode(&u.text).map_err(|e| match e {
                    DataError::Text { detail, .. } => DataError::Text {
                        id: u.id.clone(),
                        detail,
                    },
                    other => other,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(AudioTextDataset {
            utterances,
            texts,
            sample_rate,
        })
    }

    /// Samples per item at the dataset's rate, from the manifest durations (to bucket on).
    pub fn lengths(&self) -> Vec<usize> {
        self.utterances
            .iter()
            .map(|u| (u.duration * f64::from(self.sample_rate)).round() as usize)
            .collect()
    }

    /// The sample rate audio is delivered at.
    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }
}

impl Dataset<AudioTextItem, DataError> for AudioTextDataset {
    fn get(&self, index: usize) -> Result<AudioTextItem> {
        let u = self.utterances.get(index).ok_or(DataError::OutOfRange {
            index,
            len: self.utterances.len(),
        })?;
        let audio = voxspec_audio::load_resampled(std::path::Path::new(&u.path), self.sample_rate)?;
        Ok(AudioTextItem {
            id: u.id.clone(),
            speaker: u.speaker.clone(),
            audio: audio.samples,
            text: self.texts[index].clone(),
        })
    }

    fn len(&self) -> usize {
        self.utterances.len()
    }
}

/// A padded batch of (audio, text) pairs.
#[derive(Debug, Clone)]
pub struct AudioTextBatch {
    /// Utterance ids, in batch order.
    pub ids: Vec<String>,
    /// Waveforms `[batch, samples]`, zero-padded.
    pub audio: Tensor<2>,
    /// `[batch, samples]`, true on real samples.
    pub audio_mask: Tensor<2, Bool>,
    /// Real sample count of each item.
    pub audio_lengths: Vec<usize>,
    /// Text tokens `[batch, text_len]`.
    pub text: Tensor<2, Int>,
    /// `[batch, text_len]`, true on real tokens.
    pub text_mask: Tensor<2, Bool>,
    /// Real text length of each item.
    pub text_lengths: Vec<usize>,
}

/// Pads (audio, text) items into an [`AudioTextBatch`].
#[derive(Debug, Clone, Copy)]
pub struct AudioTextBatcher {
    /// Padding value for text tokens.
    pub text_pad: u32,
}

impl Batcher<AudioTextItem, AudioTextBatch> for AudioTextBatcher {
    fn batch(&self, items: Vec<AudioTextItem>, device: &Device) -> AudioTextBatch {
        let b = items.len();
        let audio_lengths: Vec<usize> = items.iter().map(|i| i.audio.len()).collect();
        let text_lengths: Vec<usize> = items.iter().map(|i| i.text.len()).collect();
        let la = audio_lengths.iter().copied().max().unwrap_or(0).max(1);
        let lt = text_lengths.iter().copied().max().unwrap_or(0).max(1);
        let waves: Vec<&[f32]> = items.iter().map(|i| i.audio.as_slice()).collect();
        let (audio, audio_mask) = pad_rows(&waves, la, 0.0f32);
        let texts: Vec<&[u32]> = items.iter().map(|i| i.text.as_slice()).collect();
        let (text, text_mask) = pad_rows(&texts, lt, self.text_pad);
        AudioTextBatch {
            ids: items.iter().map(|i| i.id.clone()).collect(),
            audio: Tensor::from_data(TensorData::new(audio, [b, la]), device),
            audio_mask: bool_tensor(audio_mask, [b, la], device),
            audio_lengths,
            text: int_tensor(text, [b, lt], device),
            text_mask: bool_tensor(text_mask, [b, lt], device),
            text_lengths,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, text: Vec<u32>, t: usize) -> TtsItem {
        let data: Vec<u32> = (0..2 * t as u32).map(|v| v + 10).collect();
        TtsItem {
            id: id.into(),
            speaker: "s".into(),
            text,
            codes: Codes::new(2, t, data).unwrap(),
            durations: None,
        }
    }

    #[test]
    fn tts_batch_is_padded_with_masks() {
        let device = Device::flex();
        let batcher = TtsBatcher {
            text_pad: 0,
            code_pad: 1024,
        };
        let batch = batcher.batch(
            vec![item("a", vec![5, 6, 7], 2), item("b", vec![8], 3)],
            &device,
        );
        assert_eq!(batch.ids, vec!["a", "b"]);
        assert_eq!(batch.text.dims(), [2, 3]);
        assert_eq!(batch.codes.dims(), [2, 2, 3]);
        let text: Vec<i64> = batch
            .text
            .into_data()
            .convert::<i64>()
            .try_to_vec()
            .unwrap();
        assert_eq!(text, vec![5, 6, 7, 8, 0, 0]);
        let codes: Vec<i64> = batch
            .codes
            .into_data()
            .convert::<i64>()
            .try_to_vec()
            .unwrap();
        // item a: streams [10, 11] and [12, 13], padded; item b: [10,11,12] and [13,14,15].
        assert_eq!(
            codes,
            vec![10, 11, 1024, 12, 13, 1024, 10, 11, 12, 13, 14, 15]
        );
        let mask: Vec<bool> = batch.code_mask.into_data().try_to_vec().unwrap();
        assert_eq!(mask, vec![true, true, false, true, true, true]);
        let tmask: Vec<bool> = batch.text_mask.into_data().try_to_vec().unwrap();
        assert_eq!(tmask, vec![true, true, true, true, false, false]);
        assert_eq!(batch.code_lengths, vec![2, 3]);
    }

    #[test]
    fn audio_batch_is_zero_padded() {
        let device = Device::flex();
        let items = vec![
            AudioTextItem {
                id: "a".into(),
                speaker: "s".into(),
                audio: vec![0.5, -0.5],
                text: vec![4],
            },
            AudioTextItem {
                id: "b".into(),
                speaker: "s".into(),
                audio: vec![0.25],
                text: vec![4, 5],
            },
        ];
        let batch = AudioTextBatcher { text_pad: 0 }.batch(items, &device);
        let audio: Vec<f32> = batch.audio.into_data().try_to_vec().unwrap();
        assert_eq!(audio, vec![0.5, -0.5, 0.25, 0.0]);
        let mask: Vec<bool> = batch.audio_mask.into_data().try_to_vec().unwrap();
        assert_eq!(mask, vec![true, true, true, false]);
        assert_eq!(batch.text_lengths, vec![1, 2]);
    }

    #[test]
    fn dataset_get_out_of_range_is_an_error() {
        let ds = TtsDataset::from_items(vec![item("a", vec![1], 1)]);
        assert_eq!(ds.len(), 1);
        assert!(ds.get(0).is_ok());
        assert!(matches!(
            ds.get(1),
            Err(DataError::OutOfRange { index: 1, len: 1 })
        ));
    }
}
