//! The report of the training-throughput benchmark (`voxspec bench train`), and the peer's
//! (`tools/bench_train_peer.py`, PyTorch on the same config and machine) it is compared with.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};
use crate::throughput::Throughput;

/// What the peer script writes: its framework, its config and its throughput.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputPeer {
    /// The peer's framework.
    pub framework: String,
    /// The config it measured.
    pub config: serde_json::Value,
    /// Its training throughput.
    pub tokens_per_second: f64,
}

/// The JSON report of the training-throughput benchmark.
#[derive(Debug, Serialize)]
pub struct ThroughputReport {
    /// `"train"`.
    pub benchmark: &'static str,
    /// The measured config.
    pub config: serde_json::Value,
    /// Parameters of the model.
    pub parameters: usize,
    /// Tokens of one step.
    pub tokens_per_step: usize,
    /// Steps timed.
    pub timed_steps: usize,
    /// Median wall time of a step.
    pub median_step_seconds: f64,
    /// Training throughput.
    pub tokens_per_second: f64,
    /// The peer measured alongside, if any.
    pub peer: Option<ThroughputPeer>,
    /// tokens_per_second / the peer's.
    pub ratio_to_peer: Option<f64>,
    /// CPU cores of the machine.
    pub cores: usize,
}

impl ThroughputReport {
    /// The report of `measured` on `config`, compared with `peer`.
    pub fn new(
        measured: &Throughput,
        config: serde_json::Value,
        peer: Option<ThroughputPeer>,
    ) -> Self {
        let tps = measured.tokens_per_second;
        Self {
            benchmark: "train",
            config,
            parameters: measured.parameters,
            tokens_per_step: measured.tokens_per_step,
            timed_steps: measured.timed_steps,
            median_step_seconds: measured.median_step_seconds,
            tokens_per_second: tps,
            ratio_to_peer: peer.as_ref().map(|p| tps / p.tokens_per_second),
            peer,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Reads a peer report and checks that it measured `config` (every key of it).
///
/// # Errors
/// [`TrainError::Io`] and [`TrainError::Json`] for an unreadable or malformed report;
/// [`TrainError::Peer`] for one of another config or a non-positive throughput.
pub fn read_throughput_peer(path: &Path, config: &serde_json::Value) -> Result<ThroughputPeer> {
    let text = std::fs::read_to_string(path).map_err(|source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let peer: ThroughputPeer = serde_json::from_str(&text).map_err(|source| TrainError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    let peer_error = |reason: String| TrainError::Peer {
        path: path.to_path_buf(),
        reason,
    };
    for (key, mine) in config.as_object().into_iter().flatten() {
        if peer.config.get(key) != Some(mine) {
            return Err(peer_error(format!(
                "the peer measured {key} = {}, this run {mine}; run both with the same flags",
                peer.config.get(key).unwrap_or(&serde_json::Value::Null)
            )));
        }
    }
    if !(peer.tokens_per_second.is_finite() && peer.tokens_per_second > 0.0) {
        return Err(peer_error("tokens_per_second must be positive".into()));
    }
    Ok(peer)
}
