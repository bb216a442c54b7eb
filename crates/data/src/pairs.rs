//! The (text, codes) pairs a language model trains on: the `train` and `dev` splits of a
//! prepared data directory joined with a token store, and the tokenizer they were read with.

use std::path::Path;

use burn::data::dataset::Dataset;

use crate::corpus::read_split_if_present;
use crate::dataset::{MissingCodes, TtsDataset, TtsItem};
use crate::error::{DataError, Result};
use crate::text::TextTokenizer;
use crate::token_store::TokenStore;

/// Loaded pairs of the train and dev splits, and the tokenizer.
pub struct TrainingPairs {
    /// The tokenizer the texts were read with.
    pub tokenizer: TextTokenizer,
    /// Training pairs (utterances without codes left out).
    pub train: Vec<TtsItem>,
    /// Validation pairs (empty without a dev split).
    pub dev: Vec<TtsItem>,
    /// Code layers of the token store.
    pub n_q: usize,
    /// Codebook size of the token store.
    pub codebook: usize,
    /// Codec frames per second of the token store.
    pub frame_rate: f32,
}

impl TrainingPairs {
    /// Reads `train.jsonl` and `dev.jsonl` (optional) of `data` with the tokenizer at
    /// `tokenizer` (default `<data>/tokenizer.json`) and joins them with the codes of the token
    /// store `tokens`; `on_split` is told each split read and its pairs.
    ///
    /// # Errors
    /// The tokenizer's and the manifests'; [`DataError::OpenStore`] naming the split whose token
    /// store cannot be opened; [`DataError::NoTrainingUtterances`] and
    /// [`DataError::NoTrainingCodes`] when nothing is left to train on.
    pub fn load(
        data: &Path,
        tokens: &Path,
        tokenizer: Option<&Path>,
        on_split: &mut dyn FnMut(&str, usize),
    ) -> Result<Self> {
        let tokenizer_path =
            tokenizer.map_or_else(|| data.join("tokenizer.json"), Path::to_path_buf);
        let tokenizer = TextTokenizer::load(&tokenizer_path)?;
        let mut splits = Vec::new();
        let mut meta = None;
        for split in ["train", "dev"] {
            let utts = read_split_if_present(data, split)?;
            if utts.is_empty() {
                if split == "train" {
                    return Err(DataError::NoTrainingUtterances {
                        data: data.to_path_buf(),
                    });
                }
                splits.push(Vec::new());
                continue;
            }
            let store = TokenStore::open(tokens, split).map_err(|e| DataError::OpenStore {
                split,
                source: Box::new(e),
            })?;
            meta = meta.or(Some(store.meta()));
            let dataset = TtsDataset::new(&utts, &tokenizer, &store, MissingCodes::Skip)?;
            let items: Vec<TtsItem> = (0..dataset.len())
                .map(|i| dataset.get(i))
                .collect::<Result<_>>()?;
            on_split(split, items.len());
            splits.push(items);
        }
        let meta = meta.ok_or_else(|| DataError::NoTrainingUtterances {
            data: data.to_path_buf(),
        })?;
        let dev = splits.pop().unwrap_or_default();
        let train = splits.pop().unwrap_or_default();
        if train.is_empty() {
            return Err(DataError::NoTrainingCodes {
                tokens: tokens.to_path_buf(),
            });
        }
        Ok(Self {
            tokenizer,
            train,
            dev,
            n_q: meta.n_q,
            codebook: meta.codebook_size as usize,
            frame_rate: meta.frame_rate,
        })
    }

    /// Training pairs with forced-alignment durations.
    pub fn with_durations(&self) -> usize {
        self.train.iter().filter(|i| i.durations.is_some()).count()
    }

    /// Whether most training pairs (at least 90 %; a real corpus's aligner leaves some out)
    /// have durations: what automatic alignment trains aligned on.
    pub fn mostly_aligned(&self) -> bool {
        let with = self.with_durations();
        with > 0 && with * 10 >= self.train.len() * 9
    }

    /// Leaves out the pairs without durations (an aligned model trains on the others only).
    pub fn keep_aligned(&mut self) {
        self.train.retain(|i| i.durations.is_some());
        self.dev.retain(|i| i.durations.is_some());
    }

    /// Positions a model must cover: `preset`'s, or — for longer data — room for a prompt
    /// utterance and a target utterance each as long as the longest pair (text + SEP + codes),
    /// which is what synthesis with an acoustic prompt feeds it.
    pub fn seq_capacity(&self, preset: usize) -> usize {
        let longest = self
            .train
            .iter()
            .chain(&self.dev)
            .map(|i| i.text.len() + 1 + i.codes.n_frames)
            .max()
            .unwrap_or(0);
        preset.max(2 * longest + 16)
    }
}
