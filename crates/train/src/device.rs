//! The Burn devices a process computes on (the CLI's `--device`), chosen once for the whole
//! process.
//!
//! `cpu` (the default) is Burn's flex backend. `wgpu` or `wgpu:N` is a GPU through Burn's wgpu
//! backend (Vulkan on Linux and Windows, Metal on macOS; WGSL shaders), in binaries built with
//! the `gpu` feature (`cargo build --release --features gpu`): `wgpu:N` is the N-th adapter of
//! [`wgpu_adapters`] (discrete GPUs first, software rasterizers such as Mesa's lavapipe last),
//! `wgpu` is `wgpu:0`. `cuda` or `cuda:N` is a CUDA GPU, in binaries built with the `cuda`
//! feature. A comma-separated list (`wgpu:0,wgpu:1`) trains data-parallel in
//! `train mtp | nar | ctc`; every other command computes on one device. Entries may repeat:
//! `cpu,cpu` runs two replicas on the CPU, which checks the data-parallel path but is no
//! faster.
//!
//! Each device is started when it is selected ([`select`]), so a missing driver or adapter is
//! one error naming the device before any work starts, not a panic inside Burn later.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use burn::tensor::{Device, FloatDType};

/// Why a device cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The device did not start, or lacks what was asked of it.
    #[error("{spec}: {reason}")]
    Unavailable { spec: DeviceSpec, reason: String },
    /// A single-device computation was given several devices.
    #[error(
        "{count} devices are selected ({list}); only data-parallel training (`train mtp`, \
         `train nar`, `train ctc`) computes on several, everything else on one"
    )]
    Several { count: usize, list: String },
    /// [`select`] was called twice.
    #[error("the devices were already selected")]
    AlreadySelected,
}

fn unavailable(spec: DeviceSpec, reason: impl Into<String>) -> DeviceError {
    DeviceError::Unavailable {
        spec,
        reason: reason.into(),
    }
}

/// One entry of `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceSpec {
    /// The CPU, through Burn's flex backend.
    Cpu,
    /// CUDA GPU number N.
    Cuda(usize),
    /// Adapter number N of [`wgpu_adapters`], through Burn's wgpu backend.
    Wgpu(usize),
}

/// Why `vulkan` is not a device of its own (Burn's `vulkan` feature).
const NO_VULKAN: &str = "Burn's `vulkan` feature (cubecl's SPIR-V compiler) is not built into \
    voxspec: it crashed Mesa's lavapipe, the Vulkan driver CI tests on, and it would switch \
    `wgpu` devices to SPIR-V as well. Use --device wgpu or wgpu:N, which runs on Vulkan \
    (WGSL shaders compiled by naga) on Linux and Windows";

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (name, index) = match s.split_once(':') {
            Some((name, index)) => {
                let index = index.parse::<usize>().map_err(|_| {
                    format!("{s:?}: the device number must be a non-negative integer")
                })?;
                (name, Some(index))
            }
            None => (s, None),
        };
        let spec = match (name, index) {
            ("cpu", None) => Self::Cpu,
            ("cuda", index) => Self::Cuda(index.unwrap_or(0)),
            ("wgpu", index) => Self::Wgpu(index.unwrap_or(0)),
            ("vulkan", _) => return Err(format!("{s:?}: {NO_VULKAN}")),
            _ => return Err(format!("{s:?}: expected cpu, wgpu, wgpu:N, cuda or cuda:N")),
        };
        if matches!(spec, Self::Cuda(_)) && !cfg!(feature = "cuda") {
            return Err(format!(
                "{spec}: this voxspec binary was built without CUDA; rebuild it with \
                 `cargo build --release --features cuda` (the build downloads LLVM; running \
                 needs the CUDA driver and NVRTC), or use --device cpu"
            ));
        }
        if matches!(spec, Self::Wgpu(_)) && !cfg!(feature = "gpu") {
            return Err(format!(
                "{spec}: this voxspec binary was built without GPU support; rebuild it with \
                 `cargo build --release --features gpu` (builds offline; running needs a \
                 Vulkan, Metal or DX12 driver), or use --device cpu"
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
            Self::Wgpu(index) => write!(f, "wgpu:{index}"),
        }
    }
}

impl DeviceSpec {
    /// The Burn device (without autodiff), started: a wgpu device has run one small kernel.
    ///
    /// # Errors
    /// When no wgpu adapter answers to the spec or it does not start.
    pub fn device(self, float: Option<FloatDType>) -> Result<Device, DeviceError> {
        let configure = |mut device: Device| -> Result<Device, DeviceError> {
            if let Some(float) = float {
                device.configure(float).map_err(|e| {
                    unavailable(self, format!("cannot compute in {float:?}: {e:?}"))
                })?;
            }
            Ok(device)
        };
        match self {
            Self::Cpu => configure(Device::flex()),
            Self::Cuda(index) => configure(cuda(index)),
            Self::Wgpu(index) => wgpu(index, configure),
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

/// A selected device: as written on the command line, and started.
struct Selected {
    spec: DeviceSpec,
    device: Device,
}

static SELECTED: OnceLock<Vec<Selected>> = OnceLock::new();

/// Records `--device` (once, from `main`) and starts each device; an empty list means the CPU.
/// `float` sets the devices' float type before anything is computed on them (`None`: f32).
///
/// # Errors
/// When a device does not start (no driver, no such adapter) or lacks the float type, or on a
/// second call.
pub fn select(specs: Vec<DeviceSpec>, float: Option<FloatDType>) -> Result<(), DeviceError> {
    let specs = if specs.is_empty() {
        vec![DeviceSpec::Cpu]
    } else {
        specs
    };
    let mut selected: Vec<Selected> = Vec::with_capacity(specs.len());
    for spec in specs {
        // A repeated entry is the same device, started once.
        let device = match selected.iter().find(|s| s.spec == spec) {
            Some(s) => s.device.clone(),
            None => spec.device(float)?,
        };
        selected.push(Selected { spec, device });
    }
    SELECTED
        .set(selected)
        .map_err(|_| DeviceError::AlreadySelected)
}

fn selected() -> &'static [Selected] {
    SELECTED.get_or_init(|| {
        vec![Selected {
            spec: DeviceSpec::Cpu,
            device: Device::flex(),
        }]
    })
}

/// The one device of a command that computes on a single device.
///
/// # Errors
/// When several devices are selected.
pub fn single() -> Result<Device, DeviceError> {
    match selected() {
        [one] => Ok(one.device.clone()),
        all => Err(DeviceError::Several {
            count: all.len(),
            list: list(all),
        }),
    }
}

/// Whether the one device of a single-device command is the CPU.
pub fn single_is_cpu() -> bool {
    matches!(selected(), [one] if one.spec == DeviceSpec::Cpu)
}

/// The devices of a data-parallel training run (the first holds the model and the optimizer).
pub fn training() -> Vec<Device> {
    selected().iter().map(|s| s.device.clone()).collect()
}

/// The selected devices as written on the command line.
pub fn describe() -> String {
    list(selected())
}

fn list(selected: &[Selected]) -> String {
    selected
        .iter()
        .map(|s| s.spec.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The wgpu adapters `wgpu:N` indexes, each as a Burn device: those of the graphics API wgpu
/// settles on (Vulkan where it has an adapter), discrete GPUs first, then integrated, virtual,
/// and software ones (lavapipe, llvmpipe, WARP) last, each kind in wgpu's order.
#[cfg(feature = "gpu")]
pub fn wgpu_adapters() -> Vec<Device> {
    use burn::tensor::{DeviceKind, DeviceType};
    let listed = Device::enumerate(DeviceType::Wgpu);
    let kinds: [fn(usize) -> DeviceKind; 4] = [
        DeviceKind::DiscreteGpu,
        DeviceKind::IntegratedGpu,
        DeviceKind::VirtualGpu,
        |_| DeviceKind::Cpu,
    ];
    let mut ordered = Vec::with_capacity(listed.len());
    for kind in kinds {
        // Burn numbers each kind from 0; `Cpu` has no number, so it is listed once.
        for index in 0..listed.len() {
            let device = Device::wgpu(kind(index));
            if !listed.contains(&device) || ordered.contains(&device) {
                break;
            }
            ordered.push(device);
        }
    }
    // An adapter of a kind Burn cannot name (`Other`, e.g. some OpenGL drivers) goes last.
    for device in listed.iter() {
        if !ordered.contains(device) {
            ordered.push(device.clone());
        }
    }
    ordered
}

/// Starts a wgpu device: opens the adapter and runs one small kernel, so that a driver that is
/// missing or fails is reported here, as an error, rather than as a panic inside Burn.
#[cfg(feature = "gpu")]
fn wgpu(
    index: usize,
    configure: impl FnOnce(Device) -> Result<Device, DeviceError>,
) -> Result<Device, DeviceError> {
    use burn::tensor::Tensor;
    let spec = DeviceSpec::Wgpu(index);
    let adapters = wgpu_adapters();
    if adapters.is_empty() {
        return Err(unavailable(
            spec,
            "wgpu finds no GPU adapter (no Vulkan, Metal, DX12 or OpenGL driver answers). \
             Install the GPU's Vulkan driver, or Mesa's software one to run without a GPU \
             (Debian/Ubuntu: `apt-get install mesa-vulkan-drivers`, and set XDG_RUNTIME_DIR), \
             or use --device cpu",
        ));
    }
    let device = adapters.get(index).cloned().ok_or_else(|| {
        unavailable(
            spec,
            format!("wgpu lists {} adapter(s), numbered from 0", adapters.len()),
        )
    })?;
    let device = configure(device)?;
    let started = quietly(|| {
        let name = device.identity().map(|identity| identity.name);
        let sum = Tensor::<1>::ones([4], &device)
            .sum()
            .try_into_scalar::<f32>()
            .map_err(|e| e.to_string());
        sum.map(|sum| (name, sum))
    });
    let (name, sum) = started
        .and_then(|result| result)
        .map_err(|message| unavailable(spec, format!("the device did not start: {message}")))?;
    if sum != 4.0 {
        return Err(unavailable(
            spec,
            format!("the device summed four ones to {sum}"),
        ));
    }
    tracing::info!(
        "{spec}: {}",
        name.as_deref().unwrap_or("an adapter without a name")
    );
    Ok(device)
}

/// Runs `f`, turning a panic into its message (printed by no panic hook).
#[cfg(feature = "gpu")]
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    result.map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

#[cfg(not(feature = "gpu"))]
fn wgpu(
    index: usize,
    _configure: impl FnOnce(Device) -> Result<Device, DeviceError>,
) -> Result<Device, DeviceError> {
    // `DeviceSpec::from_str` refuses wgpu in this build, so no spec reaches here.
    Err(unavailable(
        DeviceSpec::Wgpu(index),
        "this voxspec binary was built without the `gpu` feature",
    ))
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
        assert!("cpu:0".parse::<DeviceSpec>().is_err());
        let error = "vulkan:0".parse::<DeviceSpec>().expect_err("not offered");
        assert!(error.contains("--device wgpu"), "{error}");
        if cfg!(feature = "gpu") {
            assert_eq!("wgpu".parse(), Ok(DeviceSpec::Wgpu(0)));
            assert_eq!("wgpu:2".parse(), Ok(DeviceSpec::Wgpu(2)));
            assert_eq!(DeviceSpec::Wgpu(1).to_string(), "wgpu:1");
        } else {
            let error = "wgpu:0".parse::<DeviceSpec>().expect_err("no gpu feature");
            assert!(error.contains("--features gpu"), "{error}");
        }
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
