//! voxspec-infer: generation for voxspec's language models.
//!
//! - [`LanguageModel`]: what a decoder drives — prefill prompts, extend sequences by blocks of
//!   tokens, read logits of every head, roll back in O(1). Backends and implementations hide
//!   behind it.
//! - [`Decoder`]: `generate(model, requests, sampler) -> Vec<Generation>`; every strategy
//!   lives in its own module.
//! - [`sampler`]: temperature, top-k, top-p, repetition penalty, repetition-aware sampling,
//!   seeded per sequence.

pub mod decoder;
pub mod error;
pub mod lm;
pub mod sampler;

pub use decoder::{DecodeStats, Decoder, Generation, Limits, Request, StopReason};
pub use error::{InferError, Result};
pub use lm::{LanguageModel, Logits, LogitsRequest};
pub use sampler::{RasConfig, SamplerConfig};

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
    GroupSummary, GroupsFileError, SimilarityGroups, read_embedding_table, sweep_theta,
};
pub use self_spec::SelfSpeculativeDecoder;
pub use speculative::{SpeculativeConfig, SpeculativeDecoder};
pub use verify::{AcceptanceRule, Verdict, acceptance_probability, verify};
