//! voxspec-draft: draft models for speculative decoding, cut from a trained target.
//!
//! - [`DraftSpec`]: which target layers the draft keeps (`"0,1,-2,-1"`) and which it trains;
//!   [`DraftSpec::freeze_patterns`] gives the loop's freeze list.
//! - [`build_draft`]: the draft as an [`voxspec_mtp::MtpModel`] with one head, so it plugs into
//!   every decoder as a `LanguageModel` and exports like any model.
//! - [`DraftTask`]: fine-tuning through `voxspec-train` with cross-entropy and an optional KL
//!   term to the frozen target ([`DistillConfig`]).
//! - [`DraftSettings`]: a training run's settings, and the task they make ([`DraftRun`]).

pub mod build;
pub mod error;
pub mod run;
pub mod target;
pub mod train;

pub use build::{DraftSpec, build_draft};
pub use error::{DraftError, Result};
pub use run::{DraftRun, DraftSettings};
pub use target::{check_target, draft_config, target_info};
pub use train::{DistillConfig, DraftTask};
