//! voxspec-infer: generation for voxspec's language models.
//!
//! - [`LanguageModel`]: what a decoder drives — prefill prompts, extend sequences by blocks of
//!   tokens, read logits of every head, roll back in O(1). Backends and implementations hide
//!   behind it.
//! - [`Decoder`]: `generate(model, requests, sampler) -> Vec<Generation>`; every strategy
//!   lives in its own module.
//! - [`sampler`]: temperature, top-k, top-p, repetition penalty, repetition-aware sampling,
//!   seeded per sequence; its softmaxes run on [`fastexp`], a branch-free `exp` the compiler
//!   vectorises (the native engine's too).
//! - Decoders: [`ArDecoder`] (one token per forward), [`MtpDecoder`] (k heads per forward, each
//!   sampled on its own or the block chosen by [`viterbi`] path selection over [`Transitions`]).
//! - [`TableLm`]: a deterministic toy model for tests and overhead measurements.
//! - Speculation: [`verify`] applies any [`AcceptanceRule`] (exact, SSD tolerance, PCG groups
//!   over [`SimilarityGroups`], Medusa typical) to drafted tokens; [`SpeculativeDecoder`] drafts
//!   with a second model, [`SelfSpeculativeDecoder`] with the model's own MTP heads;
//!   [`acceptance`] estimates acceptance offline from teacher-forced distributions.
//! - [`score`]: the target's NLL of generated tokens, a quality proxy for benchmarks.
//! - [`frames`]: delayed multi-stream (SoCodec / MusicGen pattern) decoding over a
//!   [`FrameModel`]: [`FrameArDecoder`] and [`FrameSpeculativeDecoder`] (every stream of a
//!   drafted step verified on its own with any [`AcceptanceRule`]), the toy [`TableFrameLm`].

pub mod ar;
pub mod decoder;
pub mod error;
pub mod fastexp;
pub mod frames;
pub mod lm;
pub mod mtp;
pub mod sampler;
pub mod score;
pub mod toy;
pub mod transitions;
pub mod viterbi;

pub use ar::ArDecoder;
pub use decoder::{
    DecodeStats, Decoder, Generation, Limits, ModelCall, Request, Sequence, StopReason,
};
pub use error::{InferError, Result};
pub use frames::{
    FrameArDecoder, FrameDecoder, FrameGeneration, FrameLogits, FrameModel, FrameMtpDecoder,
    FrameRequest, FrameSpeculativeDecoder, FrameStats, FrameStop, TableFrameCache, TableFrameLm,
    TableFrameLmConfig, check_columns,
};
pub use lm::{LanguageModel, Logits, LogitsRequest, check_blocks};
pub use mtp::MtpDecoder;
pub use sampler::{RasConfig, SamplerConfig};
pub use score::{SequenceNll, sequence_nll};
pub use toy::{TableCache, TableLm, TableLmConfig};
pub use transitions::{TransitionCounts, Transitions, TransitionsConfig};
pub use viterbi::{Viterbi, ViterbiConfig, ViterbiPath};

pub mod acceptance;
pub mod groups;
pub mod self_spec;
pub mod speculative;
pub mod verify;

pub use acceptance::{
    ForcedSequence, OfflineAcceptance, expected_tokens_per_step, teacher_forced,
    teacher_forced_head,
};
pub use groups::{
    GroupSummary, SimilarityGroups, groups_of_mean_size, read_embedding_table, sweep_theta,
};
pub use self_spec::SelfSpeculativeDecoder;
pub use speculative::{SpeculativeConfig, SpeculativeDecoder};
pub use verify::{AcceptanceRule, Verdict, acceptance_probability, verify};
