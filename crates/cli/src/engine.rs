//! `--engine burn|native`: which implementation runs the AR model in the benches — Burn's
//! flex backend or the native CPU engine (`voxspec-engine`), built from the same loaded model.

use anyhow::Context;
use clap::ValueEnum;
use serde::Serialize;
use voxspec_engine::NativeMtp;
use voxspec_mtp::{MtpConfig, MtpModel};

/// The implementation that runs the AR model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Burn (flex on the CPU, or the selected device).
    Burn,
    /// voxspec-engine: native f32 kernels on the CPU.
    Native,
}

/// The native engine for `model` (built from `config`).
pub fn native(model: &MtpModel, config: &MtpConfig) -> anyhow::Result<NativeMtp> {
    NativeMtp::from_burn(model, config).context("building the native engine from the AR model")
}
