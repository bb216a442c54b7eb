//! The report of the training-throughput benchmark (`voxspec bench train`), and the peer's
//! (`tools/bench_train_peer.py`, PyTorch on the same config and machine) it is compared with.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};
use crate::op_profile::OpProfile;
use crate::throughput::{PhaseTimes, Throughput};

/// What the peer script writes: its framework, its config and its throughput.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputPeer {
    /// The peer's framework.
    pub framework: String,
    /// The config it measured.
    pub config: serde_json::Value,
    /// Its training throughput.
    pub tokens_per_second: f64,
    /// Its compute type (`f32`, or autocast to `bf16`/`f16`); older reports: f32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Its profile (`--profile`): phase medians and per-family times from its own profiler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<serde_json::Value>,
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
    /// The host's CPU model.
    pub host: String,
    /// The device measured (`cpu`, `wgpu:0`, ...).
    pub device: String,
    /// Float type of the tensors (`f32`, `f16`, `bf16`).
    pub float: String,
    /// Precision of the linear layers' products (`f32`, or `bf16`: mixed precision).
    pub matmul: String,
    /// Median seconds of each phase of a step (`--profile`).
    pub phases: Option<PhaseTimes>,
    /// Per-family forward and backward times (`--profile`).
    pub ops: Option<OpProfile>,
    /// Forward and backward time of a step that no family accounts for (layout copies,
    /// slicing, autograd bookkeeping), seconds (`--profile`).
    pub unattributed_seconds: Option<f64>,
}

impl ThroughputReport {
    /// The report of `measured` on `config`, compared with `peer`.
    pub fn new(
        measured: &Throughput,
        config: serde_json::Value,
        peer: Option<ThroughputPeer>,
        ops: Option<OpProfile>,
    ) -> Self {
        let tps = measured.tokens_per_second;
        let unattributed_seconds = match (&measured.phases, &ops) {
            (Some(p), Some(ops)) => Some(p.forward + p.backward - ops.total_seconds()),
            _ => None,
        };
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
            host: String::new(),
            device: String::new(),
            float: "f32".into(),
            matmul: "f32".into(),
            phases: measured.phases.clone(),
            ops,
            unattributed_seconds,
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

impl ThroughputReport {
    /// The profile as a table (`bench train --profile`): the step's phases, then each
    /// operation family's forward and backward milliseconds and share of forward + backward,
    /// then the peer's phases and families when its report has them. Empty without a profile.
    pub fn profile_text(&self) -> String {
        use std::fmt::Write;
        let (Some(p), Some(ops)) = (&self.phases, &self.ops) else {
            return String::new();
        };
        let ms = |s: f64| s * 1e3;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "step {:.1} ms (median): data {:.1}, forward {:.1}, backward {:.1}, optimizer {:.1}",
            ms(self.median_step_seconds),
            ms(p.data),
            ms(p.forward),
            ms(p.backward),
            ms(p.optimizer)
        );
        let both = p.forward + p.backward;
        let _ = writeln!(
            out,
            "{:<46} {:>5} {:>9} {:>9} {:>7}",
            "forward + backward by family", "calls", "fwd ms", "bwd ms", "share"
        );
        for f in &ops.families {
            let _ = writeln!(
                out,
                "{:<46} {:>5} {:>9.1} {:>9.1} {:>6.1}%",
                f.family,
                f.calls,
                ms(f.forward_seconds),
                ms(f.backward_seconds),
                100.0 * (f.forward_seconds + f.backward_seconds) / both
            );
        }
        if let Some(rest) = self.unattributed_seconds {
            let _ = writeln!(
                out,
                "{:<46} {:>5} {:>19.1} {:>6.1}%",
                "not in a family (layout, slicing, autograd)",
                "",
                ms(rest),
                100.0 * rest / both
            );
        }
        if let Some(profile) = self.peer.as_ref().and_then(|peer| peer.profile.as_ref()) {
            let num = |v: &serde_json::Value, key: &str| v.get(key).and_then(|x| x.as_f64());
            if let Some(phases) = profile.get("phases") {
                let _ = writeln!(
                    out,
                    "peer step: data {:.1}, forward {:.1}, backward {:.1}, optimizer {:.1} ms",
                    ms(num(phases, "data").unwrap_or(f64::NAN)),
                    ms(num(phases, "forward").unwrap_or(f64::NAN)),
                    ms(num(phases, "backward").unwrap_or(f64::NAN)),
                    ms(num(phases, "optimizer").unwrap_or(f64::NAN))
                );
            }
            let families = profile.get("families").and_then(|f| f.as_array());
            for f in families.into_iter().flatten() {
                let name = f.get("family").and_then(|n| n.as_str()).unwrap_or("?");
                let _ = writeln!(
                    out,
                    "  peer {:<41} {:>25.1} ms (forward + backward, its profiler's self time)",
                    name,
                    ms(num(f, "seconds").unwrap_or(f64::NAN))
                );
            }
        }
        out
    }
}
