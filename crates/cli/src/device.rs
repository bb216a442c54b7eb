//! `--device`: the Burn devices a command computes on, chosen once for the whole process.
//!
//! `cpu` (the default) is Burn's flex backend; `cuda` or `cuda:N` is a CUDA GPU, in binaries
//! built with the `cuda` feature (`cargo build --release --features cuda`). A comma-separated
//! list (`cuda:0,cuda:1`) trains data-parallel in `train mtp | nar | ctc`; every other command
//! computes on one device. Entries may repeat: `cpu,cpu` runs two replicas on the CPU, which
//! checks the data-parallel path but is no faster.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use burn::tensor::Device;

/// One entry of `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The CPU, through Burn's flex backend.
    Cpu,
    /// CUDA GPU number N.
    Cuda(usize),
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let spec = match s.trim() {
            "cpu" => Self::Cpu,
            "cuda" => Self::Cuda(0),
            other => match other.strip_prefix("cuda:") {
                Some(index) => Self::Cuda(index.parse().map_err(|_| {
                    format!("{other:?}: the CUDA device number must be a non-negative integer")
                })?),
                None => return Err(format!("{other:?}: expected cpu, cuda or cuda:N")),
            },
        };
        if matches!(spec, Self::Cuda(_)) && !cfg!(feature = "cuda") {
            return Err(format!(
                "{spec}: this voxspec binary was built without CUDA; rebuild it with \
                 `cargo build --release --features cuda` (the build downloads LLVM; running \
                 needs the CUDA driver and NVRTC), or use --device cpu"
            ));
        }
        Ok(spec)
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(index) => write!(f, "cuda:{index}"),
        }
    }
}

impl DeviceSpec {
    /// The Burn device (without autodiff).
    pub fn device(self) -> Device {
        match self {
            Self::Cpu => Device::flex(),
            Self::Cuda(index) => cuda(index),
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda(index: usize) -> Device {
    Device::cuda(index)
}

#[cfg(not(feature = "cuda"))]
fn cuda(index: usize) -> Device {
    // `DeviceSpec::from_str` refuses CUDA in this build, so no spec reaches here.
    unreachable!("cuda:{index} in a build without the `cuda` feature")
}

static SELECTED: OnceLock<Vec<DeviceSpec>> = OnceLock::new();

/// Records `--device` (once, from `main`); an empty list means the CPU.
pub fn select(specs: Vec<DeviceSpec>) -> anyhow::Result<()> {
    let specs = if specs.is_empty() {
        vec![DeviceSpec::Cpu]
    } else {
        specs
    };
    SELECTED
        .set(specs)
        .map_err(|_| anyhow::anyhow!("the device was already selected"))
}

fn selected() -> &'static [DeviceSpec] {
    SELECTED.get().map_or(&[DeviceSpec::Cpu], Vec::as_slice)
}

/// The one device of a command that computes on a single device.
///
/// # Errors
/// When `--device` lists several devices.
pub fn single() -> anyhow::Result<Device> {
    match selected() {
        [spec] => Ok(spec.device()),
        specs => anyhow::bail!(
            "--device lists {} devices ({}); only `train mtp`, `train nar` and `train ctc` \
             train on several, every other command takes one",
            specs.len(),
            list(specs)
        ),
    }
}

/// The devices of a data-parallel training run (the first holds the model and the optimizer).
pub fn training() -> Vec<Device> {
    selected().iter().map(|spec| spec.device()).collect()
}

/// The selected devices as written on the command line.
pub fn describe() -> String {
    list(selected())
}

fn list(specs: &[DeviceSpec]) -> String {
    specs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        assert_eq!("cpu".parse(), Ok(DeviceSpec::Cpu));
        assert_eq!(DeviceSpec::Cpu.to_string(), "cpu");
        assert!("gpu".parse::<DeviceSpec>().is_err());
        assert!("cuda:x".parse::<DeviceSpec>().is_err());
        if cfg!(feature = "cuda") {
            assert_eq!("cuda".parse(), Ok(DeviceSpec::Cuda(0)));
            assert_eq!("cuda:3".parse(), Ok(DeviceSpec::Cuda(3)));
            assert_eq!(DeviceSpec::Cuda(1).to_string(), "cuda:1");
        } else {
            let error = "cuda:1".parse::<DeviceSpec>().expect_err("no CUDA here");
            assert!(error.contains("built without CUDA"), "{error}");
        }
    }
}
