//! Where a model runs: `--device cpu|cuda[:N]|metal[:N]|auto`.

use std::fmt;
use std::str::FromStr;

use candle_core::Device;

use crate::EngineError;

/// A device choice. `Auto` picks the best device this build supports and
/// the machine has (a CUDA GPU, then Metal, then the CPU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    #[default]
    Auto,
    Cpu,
    Cuda(usize),
    Metal(usize),
}

impl FromStr for DeviceChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let (kind, ordinal) = match s.split_once(':') {
            Some((kind, n)) => {
                let n = n
                    .parse()
                    .map_err(|_| format!("'{s}': the device number must be an integer"))?;
                (kind, Some(n))
            }
            None => (s.as_str(), None),
        };
        match (kind, ordinal) {
            ("auto", None) => Ok(Self::Auto),
            ("cpu", None) => Ok(Self::Cpu),
            ("cuda", n) => Ok(Self::Cuda(n.unwrap_or(0))),
            ("metal", n) => Ok(Self::Metal(n.unwrap_or(0))),
            _ => Err(format!(
                "'{s}' is not a device (auto, cpu, cuda, cuda:N, metal, metal:N)"
            )),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Auto => write!(f, "auto"),
            Self::Cpu => write!(f, "cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::Metal(n) => write!(f, "metal:{n}"),
        }
    }
}

impl DeviceChoice {
    /// The device a model will run on: `Auto` made concrete, and an error
    /// for a device this build lacks or the machine does not have.
    pub fn resolve(self) -> Result<Self, EngineError> {
        match self {
            Self::Auto => Ok(Self::best()),
            choice => choice.candle().map(|_| choice),
        }
    }

    fn best() -> Self {
        if cfg!(feature = "cuda") && Self::Cuda(0).candle().is_ok() {
            Self::Cuda(0)
        } else if cfg!(feature = "metal") && Self::Metal(0).candle().is_ok() {
            Self::Metal(0)
        } else {
            Self::Cpu
        }
    }

    /// The candle device (after [`Self::resolve`]; `Auto` resolves here).
    pub fn candle(self) -> Result<Device, EngineError> {
        let unavailable = |e: candle_core::Error| EngineError::Device(format!("{self}: {e}"));
        match self {
            Self::Auto => Self::best().candle(),
            Self::Cpu => Ok(Device::Cpu),
            #[cfg(feature = "cuda")]
            Self::Cuda(n) => {
                mlxr_models::cuda_device(n).map_err(|e| EngineError::Device(format!("{self}: {e}")))
            }
            #[cfg(not(feature = "cuda"))]
            Self::Cuda(_) => Err(EngineError::Device(
                "this build has no CUDA support; rebuild with --features cuda".into(),
            )),
            Self::Metal(n) if cfg!(feature = "metal") => Device::new_metal(n).map_err(unavailable),
            Self::Metal(_) => Err(EngineError::Device(
                "this build has no Metal support; rebuild with --features metal (macOS)".into(),
            )),
        }
    }

    /// The name of a candle device as `--device` takes it.
    pub fn of(device: &Device) -> Self {
        match device.location() {
            candle_core::DeviceLocation::Cpu => Self::Cpu,
            candle_core::DeviceLocation::Cuda { gpu_id } => Self::Cuda(gpu_id),
            candle_core::DeviceLocation::Metal { gpu_id } => Self::Metal(gpu_id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_every_form() {
        for (text, choice) in [
            ("auto", DeviceChoice::Auto),
            ("CPU", DeviceChoice::Cpu),
            ("cuda", DeviceChoice::Cuda(0)),
            ("cuda:1", DeviceChoice::Cuda(1)),
            ("metal", DeviceChoice::Metal(0)),
        ] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), choice, "{text}");
        }
        assert_eq!(DeviceChoice::Cuda(2).to_string(), "cuda:2");
        for bad in ["gpu", "cuda:x", "cpu:1", ""] {
            assert!(bad.parse::<DeviceChoice>().is_err(), "{bad}");
        }
    }

    #[cfg(not(any(feature = "cuda", feature = "metal")))]
    #[test]
    fn auto_is_the_cpu_without_gpu_support_and_missing_backends_are_clear() {
        assert_eq!(DeviceChoice::Auto.resolve().unwrap(), DeviceChoice::Cpu);
        let err = DeviceChoice::Cuda(0).resolve().unwrap_err().to_string();
        assert!(err.contains("rebuild with --features cuda"), "{err}");
        let err = DeviceChoice::Metal(0).resolve().unwrap_err().to_string();
        assert!(err.contains("rebuild with --features metal"), "{err}");
    }
}
