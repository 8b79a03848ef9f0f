//! How an engine is sized: KV memory, block size, batch limits.

use crate::spec::SpecOverrides;
use crate::DeviceChoice;
use std::fmt;
use std::str::FromStr;

use candle_core::DType;

/// How much memory the KV cache gets, allocated once at start.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KvBudget {
    Bytes(u64),
    /// A fraction (0, 1] of the machine's physical memory, or of a GPU's
    /// free memory for a model on a GPU ([`Self::bytes_on`]).
    Fraction(f64),
}

impl KvBudget {
    /// The budget in bytes of RAM.
    pub fn bytes(&self) -> u64 {
        match *self {
            KvBudget::Bytes(b) => b,
            KvBudget::Fraction(f) => (physical_memory() as f64 * f) as u64,
        }
    }

    /// The budget on `device`: a fraction is of RAM for the CPU and of the
    /// free memory of a GPU (after the weights were loaded to it).
    pub fn bytes_on(&self, device: &candle_core::Device) -> u64 {
        match (*self, free_device_memory(device)) {
            (KvBudget::Fraction(f), Some(free)) => (free as f64 * f) as u64,
            _ => self.bytes(),
        }
    }
}

#[cfg(feature = "cuda")]
fn free_device_memory(device: &candle_core::Device) -> Option<u64> {
    match device {
        candle_core::Device::Cuda(d) => {
            let (free, _total) = d.cuda_stream().context().mem_get_info().ok()?;
            Some(free as u64)
        }
        _ => None,
    }
}

#[cfg(not(feature = "cuda"))]
fn free_device_memory(_: &candle_core::Device) -> Option<u64> {
    None
}

/// Parses `0.25` (a fraction of RAM, or of free GPU memory), `2GiB`, `512MiB`, `1.5GB`, `1000000`.
impl FromStr for KvBudget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = || {
            format!("'{s}' is not a KV budget: give bytes (e.g. 2GiB, 512MiB, 1000000) or a fraction of RAM or free GPU memory (e.g. 0.25)")
        };
        if s.contains('.') && !s.contains(|c: char| c.is_ascii_alphabetic()) {
            let value: f64 = s.parse().map_err(|_| bad())?;
            if value > 0.0 && value <= 1.0 {
                return Ok(KvBudget::Fraction(value));
            }
        }
        s.parse::<crate::ByteSize>()
            .map(|b| KvBudget::Bytes(b.0))
            .map_err(|_| bad())
    }
}

impl fmt::Display for KvBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvBudget::Bytes(b) => write!(f, "{:.1} MiB", *b as f64 / (1024.0 * 1024.0)),
            KvBudget::Fraction(x) => write!(f, "{:.0}% of memory", x * 100.0),
        }
    }
}

/// Element type of cached keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KvDtype {
    #[default]
    F16,
    Bf16,
    F32,
}

impl KvDtype {
    pub fn dtype(self) -> DType {
        match self {
            KvDtype::F16 => DType::F16,
            KvDtype::Bf16 => DType::BF16,
            KvDtype::F32 => DType::F32,
        }
    }
}

impl FromStr for KvDtype {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f16" | "fp16" => Ok(KvDtype::F16),
            "bf16" => Ok(KvDtype::Bf16),
            "f32" | "fp32" => Ok(KvDtype::F32),
            _ => Err(format!("'{s}' is not a KV dtype (f16, bf16, f32)")),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Where models run (resolved when the model loads).
    pub device: DeviceChoice,
    /// Tokens per KV block.
    pub block_size: usize,
    pub kv_budget: KvBudget,
    pub kv_dtype: KvDtype,
    /// Tokens one forward pass may carry: decode tokens plus prefill chunks.
    pub max_num_batched_tokens: usize,
    /// Sequences running at once.
    pub max_num_seqs: usize,
    /// While requests wait, a prompt already being read takes at most this
    /// many tokens per step, leaving the rest of the budget to newcomers
    /// (short requests are not stuck behind a long prompt).
    pub long_prefill_token_threshold: usize,
    /// Reuse the KV of shared prompt prefixes across requests.
    pub prefix_caching: bool,
    /// How requests that say nothing speculate: the values set here, the
    /// others [`crate::Speculation::default`]'s; with a draft model and no type,
    /// the draft model drafts.
    pub speculation: SpecOverrides,
    /// A model with the target's vocabulary that drafts for requests with
    /// `speculative.type: draft`, loaded with the engine onto its device;
    /// its KV cache shares the budget and the block ids.
    pub draft_model: Option<std::path::PathBuf>,
    /// The draft model scores only this many of its vocabulary's most
    /// frequent tokens (FR-Spec) when a ranking ships for its vocabulary
    /// ([`crate::spec::frequent_tokens`]; GGUF drafts); `None`: all of them.
    pub draft_vocab: Option<usize>,
    /// Steps in which more sequences than this decode verify no drafts:
    /// the batch already keeps the hardware busy.
    pub spec_disable_batch: usize,
    /// When constrained sequences' grammar masks are computed.
    pub grammar_masks: crate::GrammarMasks,
    /// Whether a step's sequences sample (and compute masks ahead) on
    /// rayon's threads (more than one) or on one thread. `None`: rayon's for
    /// a model on a GPU, whose forward pass leaves the cores idle; one
    /// thread on the CPU.
    pub sample_threads: Option<usize>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            device: DeviceChoice::Auto,
            block_size: 16,
            kv_budget: KvBudget::Fraction(0.1),
            kv_dtype: KvDtype::F16,
            max_num_batched_tokens: 512,
            max_num_seqs: 64,
            long_prefill_token_threshold: 256,
            prefix_caching: true,
            speculation: SpecOverrides::default(),
            draft_model: None,
            draft_vocab: Some(crate::spec::frequent_tokens::DEFAULT_DRAFT_VOCAB),
            spec_disable_batch: 4,
            grammar_masks: crate::GrammarMasks::Auto,
            sample_threads: None,
        }
    }
}

/// Physical memory in bytes (8 GiB when it cannot be read).
pub fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on error.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages > 0 && page_size > 0 {
        pages as u64 * page_size as u64
    } else {
        8 << 30
    }
}

/// The default thread count for the CPU kernels: the physical cores this
/// process may use (SMT siblings share one core's SIMD units, so a second
/// thread per core slows the kernels down, as llama.cpp's default also
/// assumes). `RAYON_NUM_THREADS`, when set, wins.
pub fn default_threads() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(n) = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    physical_cores(std::path::Path::new("/sys/devices/system/cpu"))
        .map_or(logical, |cores| cores.clamp(1, logical))
}

/// Distinct (package, core) pairs among the CPUs of a Linux sysfs
/// `devices/system/cpu` folder; `None` where there is no such folder.
fn physical_cores(sysfs_cpu: &std::path::Path) -> Option<usize> {
    let mut cores = std::collections::HashSet::new();
    for entry in std::fs::read_dir(sysfs_cpu).ok()?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(entry.path().join("topology").join(f)).ok();
        if let (Some(package), Some(core)) = (read("physical_package_id"), read("core_id")) {
            cores.insert((package.trim().to_string(), core.trim().to_string()));
        }
    }
    (!cores.is_empty()).then_some(cores.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn physical_cores_count_smt_siblings_once() {
        let dir = tempfile::tempdir().unwrap();
        // Two packages; package 0 has cores 0 and 1 with two threads each,
        // package 1 one core with one thread; plus entries that are not CPUs.
        let cpus = [
            (0, 0, "0"),
            (1, 0, "1"),
            (2, 0, "0"),
            (3, 0, "1"),
            (4, 1, "0"),
        ];
        for (cpu, package, core) in cpus {
            let topo = dir.path().join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&topo).unwrap();
            std::fs::write(topo.join("physical_package_id"), format!("{package}\n")).unwrap();
            std::fs::write(topo.join("core_id"), format!("{core}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("cpufreq")).unwrap();
        std::fs::create_dir_all(dir.path().join("cpuidle")).unwrap();
        assert_eq!(physical_cores(dir.path()), Some(3));
        assert_eq!(physical_cores(&dir.path().join("missing")), None);
    }

    #[test]
    fn budgets_parse() {
        assert_eq!("2GiB".parse(), Ok(KvBudget::Bytes(2 << 30)));
        assert_eq!("512 MiB".parse(), Ok(KvBudget::Bytes(512 << 20)));
        assert_eq!("1.5GB".parse(), Ok(KvBudget::Bytes(1_500_000_000)));
        assert_eq!("1000000".parse(), Ok(KvBudget::Bytes(1_000_000)));
        assert_eq!("0.25".parse(), Ok(KvBudget::Fraction(0.25)));
        for bad in ["", "-1", "0", "abc", "3 parsecs", "NaN"] {
            assert!(bad.parse::<KvBudget>().is_err(), "{bad}");
        }
        assert!(KvBudget::Fraction(0.5).bytes() > 0);
    }
}
