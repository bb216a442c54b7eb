//! voxspec-train: the one training loop.
//!
//! A task ([`TrainTask`]) supplies its model, a deterministic batch plan ([`BatchSource`]) and
//! its losses ([`Losses`]); [`Trainer`] does the rest: AdamW with warm-up and cosine or
//! inverse-sqrt decay ([`LrSchedule`]), gradient accumulation, global-norm clipping, a
//! non-finite guard, frozen parameters, several alternating optimizer phases ([`Phase`], e.g. a
//! codec's generator and discriminator), validation, `metrics.jsonl` + TensorBoard, a stop flag,
//! and atomic per-step checkpoints from which a run resumes exactly ([`checkpoint`]); the
//! commands' wrapper around it (run settings for `--resume`, Ctrl-C) is in [`resumable`].
//!
//! ```ignore
//! let trainer = Trainer::new(config, task, "runs/mtp", &Device::flex());
//! let stop = trainer.stop_flag(); // set it from a Ctrl-C handler
//! let outcome = trainer.run(&mut progress_bar)?;
//! ```

pub mod checkpoint;
pub mod config;
pub mod device;
pub mod error;
pub mod metrics;
pub mod op_profile;
pub mod params;
pub mod report_text;
pub mod resumable;
pub mod run_dir;
pub mod task;
pub mod throughput;
pub mod throughput_report;
pub mod trainer;
pub mod weights;

pub use checkpoint::{CheckpointPaths, TrainState, latest_checkpoint, list_checkpoints};
pub use config::{LrSchedule, OptimConfig, TrainConfig};
pub use device::{DeviceError, DeviceSpec};
pub use error::{Result, TrainError};
pub use metrics::{MetricsRecord, read_metrics};
pub use op_profile::{FamilyTime, OpProfile, profile_ops};
pub use params::param_paths;
pub use report_text::{loss_text, validation_text};
pub use resumable::{Finished, RunSettings, resume_or_start, stop_on_ctrl_c};
pub use run_dir::{RunStart, open_run, save_run_settings};
pub use task::{BatchSource, Losses, Phase, TrainTask};
pub use throughput::{PhaseTimes, Throughput, ThroughputConfig};
pub use throughput_report::{ThroughputPeer, ThroughputReport, read_throughput_peer};
pub use trainer::{StepReport, TrainObserver, TrainOutcome, Trainer};
pub use weights::{load_weights, read_model_config, save_weights, write_model_config};
