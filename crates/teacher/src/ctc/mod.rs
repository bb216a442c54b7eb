//! The supervised CTC teacher: a small speech recogniser trained here on the prepared corpus,
//! whose hidden states are an offline semantic target (50 Hz, the codec frame rate) and whose
//! transcripts give voxspec a built-in intelligibility score (character error rate).
//!
//! | file | what |
//! |---|---|
//! | `frontend` | [`Frontend`]: 80-band log-mel at 100 Hz + per-utterance normalisation |
//! | `model` | [`CtcModelConfig`] → [`CtcModel`]: conv subsampling ×2 + bidirectional transformer + classifier |
//! | `loss` | [`ctc_loss`]: CTC forward-backward on the host, exact gradient into the graph |
//! | `forced_choice` | [`ForcedChoice`]: sentence identification among candidates by CTC likelihood |
//! | `decode` | [`greedy_decode`]: best path, repeats collapsed, blanks dropped |
//! | `cer` | [`ErrorCounts`], [`cer`], [`corpus_cer`]: Levenshtein over characters |
//! | `data` | [`CtcCorpus`], [`CtcBatches`]: features, targets, deterministic batch plan, SpecAugment |
//! | `task` | [`CtcTask`]: the `voxspec_train::TrainTask` |
//! | `run` | [`run::CtcRunFile`]: a training run's settings and tokenizer |
//! | `teacher` | [`CtcTeacher`]: load/save, transcribe, [`crate::SemanticTeacher`] |
//!
//! The vocabulary is `voxspec-data`'s character tokenizer trained on the training transcripts
//! (normalised: NFKC, ASCII quotes and dashes, lowercase, single spaces; `▁` marks word
//! starts). Its `<pad>` (id 0) is the CTC blank, `<unk>` (id 1) stands for characters unseen in
//! training; `<bos>`/`<eos>` are never targets.

pub mod cer;
pub mod data;
pub mod decode;
pub mod forced_choice;
pub mod frontend;
pub mod loss;
pub mod model;
pub mod run;
pub mod score;
pub mod task;
pub mod teacher;

pub use cer::{ErrorCounts, cer, corpus_cer, levenshtein};
pub use data::{CorpusReport, CtcBatch, CtcBatches, CtcCorpus, CtcUtterance, SpecAugmentConfig};
pub use decode::{collapse_path, greedy_decode};
pub use forced_choice::{
    ClipChoice, ClipVerdict, ForcedChoice, ForcedChoiceSummary, LengthNorm, LogProbs,
};
pub use frontend::{Frontend, FrontendConfig};
pub use loss::{
    CtcAlignment, CtcLossOutput, ctc_alignment, ctc_log_likelihood, ctc_loss, log_add, min_frames,
};
pub use model::{BLANK, CtcModel, CtcModelConfig, CtcOutput};
pub use score::ScoredUtterance;
pub use task::{CtcTask, CtcTaskConfig};
pub use teacher::{CTC_KIND, CtcTeacher, CtcTeacherFile, read_teacher_file};

use burn::tensor::TensorData;

use crate::error::TeacherError;

/// The values of a float tensor read back to the host as `f32`.
pub(crate) fn host_f32(data: TensorData, what: &'static str) -> Result<Vec<f32>, TeacherError> {
    data.try_into_vec_as::<f32>()
        .map_err(|e| TeacherError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}

/// The values of an integer tensor read back to the host as `i64`.
pub(crate) fn host_i64(data: TensorData, what: &'static str) -> Result<Vec<i64>, TeacherError> {
    data.try_into_vec_as::<i64>()
        .map_err(|e| TeacherError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}
