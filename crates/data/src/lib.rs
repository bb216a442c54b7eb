//! voxspec-data: everything between a corpus on disk and a padded batch of tensors.
//!
//! - [`corpus`]: scan LibriTTS-layout or plain corpora into train/dev/test manifests;
//! - [`manifest`]: the JSON-lines manifest format;
//! - [`textgrid`], [`textgrid_write`]: phone alignments from and to Praat TextGrids (MFA output,
//!   the minitts alignments, `voxspec align`);
//! - [`text`]: text normalisation and the BPE / character / phoneme tokenizer (`tokenizer.json`);
//! - [`phones`], [`g2p`]: the phone set and English grapheme-to-phoneme (CMUdict + rules);
//! - [`sentences`]: long texts cut into sentences (and over-long sentences into clauses);
//! - [`token_store`]: codec codes `[n_q, T]` per utterance in safetensors shards;
//! - [`phase_shift`]: phase-shifted token grids (ids, shifted alignments) for augmentation;
//! - [`codes_file`]: one recording's codes as a safetensors file (`codec encode|decode`);
//! - [`dataset`], [`bucket`]: Burn datasets and batchers with length bucketing and masks.

pub mod bucket;
pub mod codes_file;
pub mod corpus;
pub mod coverage;
pub mod dataset;
pub mod delay;
pub mod durations;
pub mod error;
mod fsutil;
pub mod g2p;
pub mod manifest;
pub mod pairs;
pub mod phase_shift;
pub mod phones;
pub mod sentences;
pub mod splits;
pub mod text;
pub mod textgrid;
pub mod textgrid_write;
pub mod token_store;

pub use bucket::{BucketConfig, bucket_batches};
pub use codes_file::{CodesFile, read_codes_file, write_codes_file};
pub use corpus::{
    AlignmentIssue, Layout, NoProgress, PrepareConfig, PrepareOutcome, PrepareSummary, Progress,
    SkipReason, TranscriptKind, prepare, read_split, read_split_if_present,
};
pub use coverage::{DictionaryCoverage, chars_per_token, dictionary_coverage};
pub use dataset::{
    AudioTextBatch, AudioTextBatcher, AudioTextDataset, AudioTextItem, MissingCodes, TtsBatch,
    TtsBatcher, TtsDataset, TtsItem,
};
pub use delay::{DelayPattern, UNGENERATED};
pub use durations::alignment_frames;
pub use error::{DataError, Result};
pub use fsutil::write_atomic;
pub use g2p::g2p;
pub use manifest::{Utterance, read_manifest, write_manifest};
pub use pairs::TrainingPairs;
pub use phones::{PHONES, normalize_phone};
pub use splits::{SplitManifest, load_waves, read_splits};
pub use text::{Normalization, TextTokenizer, TokenizerKind};
pub use textgrid::{Alignment, read_textgrid};
pub use textgrid_write::{textgrid_text, write_textgrid};
pub use token_store::{Codes, TokenStore, TokenStoreMeta, TokenStoreWriter};
