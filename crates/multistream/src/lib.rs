//! voxspec-multistream: the delayed multi-stream codec LM of SoCodec (Guo et al. 2024, §4) on
//! the tokens of a multi-stream codec (OPQ streams), decoding all streams in parallel.
//!
//! - [`MultiStreamConfig`] → [`MultiStreamModel`]: one sequence of a voice vector (prepended,
//!   projected from `global_dim`), text tokens and the delayed speech steps of
//!   [`voxspec_data::DelayPattern`] (stream `j` delayed by `d · j`); each stream has its own
//!   embedding table (codes and the special token `S`), summed per step; rotary positions plus a
//!   learned voice/text/speech segment embedding; one head per stream over the codes and EOS.
//!   Step 0 (`S` everywhere) is the BOS. Presets `tiny`, `small`, `base`.
//! - [`MultiStreamModel::forward`] over whole rows ([`MsInput`] from [`SeqRow`]s) and
//!   [`MultiStreamModel::forward_cached`] over a `voxspec-nn` [`voxspec_nn::KvCache`]: a prompt,
//!   one new step, or `k` steps at once for speculative verification; roll back with
//!   `KvCache::truncate`.
//! - [`MultiStreamTask`] ([`voxspec_train::TrainTask`]) over [`MultiStreamData`] ([`MsItem`]s:
//!   text ids, codes from a `TokenStore`, optional global vectors): per-stream cross-entropy on
//!   the valid positions of the delay pattern and each stream's EOS, averaged over streams
//!   ([`multistream_loss`]); seeded bucketed batch plan, padding masked; optional input-code
//!   dropout and the shuffled-text diagnostic for validation.
//! - Aligned models ([`align`]): a [`StepTrack`] of the phones each coming frame speaks (with
//!   the units of the frame each covers) added at every speech step, and a duration predictor.
//! - [`MsFrameLm`]: the model behind `voxspec-infer`'s `FrameModel`, so its frame decoders (AR,
//!   speculative with per-stream acceptance) drive it; [`cut_draft`] makes drafts from its
//!   layers; [`save_multistream`] / [`load_multistream`] read and write model directories.
//! - [`prepare`]: the training data before batching (voice vectors, duration units,
//!   phase-shifted encodings, sizing, per-stream transition matrices).
//! - [`run`]: training runs (a new LM, a draft, extra heads on a frozen LM): the settings they
//!   keep for a resumed run, their tasks, and the model directory they end with.
//! - [`greedy_decode`]: the reference greedy loop (one forward per step, `S` forced at invalid
//!   positions, the prompt never overwritten, stop at stream 0's EOS or `max_frames`) the frame
//!   decoders are tested against; returns the reverted frames `[streams][T]`.

pub mod align;
pub mod decode;
pub mod draft;
pub mod error;
pub mod files;
pub mod input;
pub mod lm;
pub mod model;
pub mod mtp;
pub mod prepare;
pub mod run;
pub mod train;

pub use align::{MsAlignConfig, StepTrack, StepTrackEmbedding, alignment_units};
pub use decode::{DecodeRequest, greedy_decode, request_track};
pub use draft::{cut_draft, draft_freeze_patterns};
pub use error::{MultiStreamError, Result};
pub use files::{
    MULTISTREAM_DRAFT_KIND, MULTISTREAM_KIND, MsFile, load_multistream, load_stream_transitions,
    save_multistream, save_stream_transitions, transitions_path,
};
pub use input::{MsInput, SPEECH, SeqRow, TEXT, VOICE};
pub use lm::{MsCache, MsFrameLm, MsPrompt};
pub use model::{MultiStreamConfig, MultiStreamModel};
pub use mtp::{MsMtpConfig, MsMtpHead, base_freeze_patterns, with_fresh_heads};
pub use prepare::{
    DurationUnits, PhaseShifts, Voices, add_phase_shifts, duration_units, pair_voices,
    phase_shifted, positions_needed, stream_transitions, units_per_frame, voice_vectors,
    voiced_items,
};
pub use run::{
    DraftRun, DraftSettings, FrozenLm, HeadsRun, HeadsSettings, MsModelOptions,
    MultiStreamSettings, save_run,
};
pub use train::{
    MsBatch, MsItem, MultiStreamData, MultiStreamTask, MultiStreamTaskConfig, build_batch,
    build_batch_with, delayed_codes, multistream_loss,
};
