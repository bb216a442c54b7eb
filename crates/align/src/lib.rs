//! voxspec-align: phone alignments from voxspec alone.
//!
//! An acoustic model over the phone set ([`AlignerModel`]: convolutions and a bidirectional
//! transformer on 100 Hz log-mel) is trained on the corpus to be aligned, from its transcripts
//! only, with the forward-sum objective: the likelihood of the audio summed over every monotonic
//! path through the transcript's phones ([`Topology`], pauses between words optional), computed
//! by forward-backward on the host ([`hmm`]) and trained through the shared loop
//! ([`AlignTask`]). The Viterbi path then gives each phone its frames ([`Aligner`]), written
//! as TextGrids that `voxspec prepare --alignments` reads.
//!
//! | file | what |
//! |---|---|
//! | `topology` | [`Topology`]: a transcript's states (G2P phones, required and optional pauses) |
//! | `hmm` | [`forward_backward`], [`viterbi`]: summed likelihood, posteriors, best path |
//! | `model` | [`AlignerModelConfig`] → [`AlignerModel`] |
//! | `scoring` | [`Scoring`]: frame scores (class prior, [`SilenceGate`]) |
//! | `data` | [`AlignCorpus`], [`AlignBatches`]: features, topologies, batch plan |
//! | `task` | [`AlignTask`], [`forward_sum_loss`]: the `voxspec_train::TrainTask` |
//! | `aligner` | [`Aligner`]: files, alignments of a corpus |
//! | `boundary` | [`BoundaryErrors`]: boundary error against a reference alignment |
//! | `training` | [`train_aligner`]: flat start then the main objective |
//! | `report` | [`AlignReport`]: what aligning a corpus found |

pub mod aligner;
pub mod boundary;
pub mod data;
pub mod error;
pub mod hmm;
pub mod model;
pub mod report;
pub mod scoring;
pub mod task;
pub mod topology;
pub mod training;

pub use aligner::{ALIGNER_KIND, Aligner, AlignerFile, CorpusAlignment, UtteranceAlignment};
pub use boundary::BoundaryErrors;
pub use data::{
    AlignBatch, AlignBatches, AlignCorpus, AlignUtterance, text_normalizer, transcript_topology,
};
pub use error::AlignError;
pub use hmm::{Posteriors, Segment, forward_backward, viterbi};
pub use model::{AlignerModel, AlignerModelConfig};
pub use report::{
    AlignReport, BoundaryReport, compare_with_references, inner_pauses, mean_score, textgrid_path,
};
pub use scoring::{Scoring, SilenceGate};
pub use task::{
    AlignTask, AlignTaskConfig, ForwardSumLoss, Objective, best_path_classes, forward_sum_loss,
    frame_cross_entropy, uniform_classes,
};
pub use topology::{N_CLASSES, SIL_CLASS, Topology, class_of_label};
pub use training::{AlignRunFile, AlignTraining, AlignTrainingObserver, train_aligner};

use burn::tensor::TensorData;

/// The values of a float tensor read back to the host as `f32`.
pub(crate) fn host_f32(data: TensorData, what: &'static str) -> Result<Vec<f32>, AlignError> {
    data.try_into_vec_as::<f32>()
        .map_err(|e| AlignError::TensorRead {
            what,
            reason: format!("{e:?}"),
        })
}
