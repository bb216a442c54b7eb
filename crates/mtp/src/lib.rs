//! voxspec-mtp: the AR stage of voxspec's codec language model, with multi-token prediction.
//!
//! - [`MtpConfig`] → [`MtpModel`]: text tokens, a separator and stream-0 codes in one sequence
//!   for a decoder-only `voxspec-nn` transformer, with `n` prediction heads (head `i` predicts
//!   the code `i + 1` steps ahead; Nguyen et al. 2025, §III-B). Trained once with `n` heads,
//!   any `k ≤ n` can be used at inference.
//! - [`MtpModel`] implements [`voxspec_infer::LanguageModel`] with a KV cache ([`MtpCache`])
//!   and [`TtsPrompt`]s, so every decoder of `voxspec-infer` drives it.
//! - Aligned models ([`AlignConfig`]): the text is phones with durations (forced alignments in
//!   training, a [`DurationPredictor`] at inference) and every code step sees the phones of the
//!   frames ahead through a [`PhoneTrack`]; see [`track`].
//! - [`MtpTask`]: the model as a `voxspec-train` task with the paper's sum-over-heads loss.
//! - [`NarConfig`] → [`NarModel`], [`NarTask`]: VALL-E's NAR stage filling RVQ layers
//!   `1..n_q` from the text, the prompt and the layers below.
//! - [`export`]: a trained model as a self-contained card (weights, config, tokenizer,
//!   README).
//! - [`run`]: training runs of both on loaded pairs — model sizes, the alignment decision, the
//!   run settings and the tasks built from them.

pub mod checkpoint;
pub mod duration;
pub mod error;
pub mod export;
pub mod forward_cost;
pub mod lm;
pub mod model;
pub mod nar;
pub mod nar_train;
pub mod run;
pub mod track;
pub mod train;

pub use checkpoint::{MtpFile, NarFile, load_mtp, load_nar, save_mtp, save_nar};
pub use duration::DurationPredictor;
pub use error::{MtpError, Result};
pub use export::{ExportDtype, ExportExtras, ExportSource, Exported};
pub use forward_cost::{PrefillTimed, decode_ms_per_token, forward_costs, greedy_ms_per_token};
pub use lm::{MtpCache, TtsPrompt};
pub use model::{MtpConfig, MtpHead, MtpModel};
pub use nar::{NarConfig, NarInput, NarItem, NarModel, NarTrackConfig};
pub use nar_train::{NarBatch, NarBatchItem, NarData, NarTask, NarTaskConfig};
pub use run::{
    AlignmentChoice, AlignmentMode, MtpRunOptions, MtpSettings, NarSettings, choose_alignment,
    head_weights,
};
pub use track::{AlignConfig, FrameTrack, PhoneTrack, TrackLayout, summed_slots};
pub use train::{
    BatchItem, DurationBatch, HostBatch, HostDurations, MtpBatch, MtpData, MtpTask, MtpTaskConfig,
    duration_loss, host_batch, mtp_loss, rescale_durations,
};
