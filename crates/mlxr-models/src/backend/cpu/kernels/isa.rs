//! The instruction sets the CPU kernels may use: what the CPU has, capped by
//! `MLXR_CPU_ISA` (a debug knob: `scalar`, `avx2`, `avxvnni` or `avx512`),
//! so that one machine can run, test and benchmark every kernel path (an
//! AVX-512 machine the AVX2 paths with and without AVX-VNNI, any machine
//! the portable one). Every run-time
//! feature check of the kernels goes through [`allows`]; the cap is read
//! once per process.

use std::sync::OnceLock;

/// Kernel paths, in order: each allows the ones below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// Portable Rust only.
    Scalar,
    /// SSE4.1, AVX2, FMA and F16C where the CPU has them (AMD Zen 2 and 3,
    /// Intel before Alder Lake).
    Avx2,
    /// The same, and AVX-VNNI's 256-bit dot products where the CPU has them
    /// (Intel since Alder Lake, without AVX-512).
    AvxVnni,
    /// AVX-512 (F, BW, VNNI) where the CPU has it.
    Avx512,
}

impl Isa {
    /// A value of `MLXR_CPU_ISA`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "scalar" | "portable" => Some(Isa::Scalar),
            "avx2" => Some(Isa::Avx2),
            "avxvnni" | "avx-vnni" => Some(Isa::AvxVnni),
            "avx512" | "avx-512" => Some(Isa::Avx512),
            _ => None,
        }
    }
}

/// The cap from `MLXR_CPU_ISA` (none when unset; an unknown value is
/// reported on stderr once and ignored).
pub fn cap() -> Isa {
    static CAP: OnceLock<Isa> = OnceLock::new();
    *CAP.get_or_init(|| match std::env::var("MLXR_CPU_ISA") {
        Err(_) => Isa::Avx512,
        Ok(v) => Isa::parse(&v).unwrap_or_else(|| {
            eprintln!("MLXR_CPU_ISA={v} ignored: expected scalar, avx2, avxvnni or avx512");
            Isa::Avx512
        }),
    })
}

/// Whether kernels of `level` may run (the CPU's own features are checked
/// next to this by each caller).
pub fn allows(level: Isa) -> bool {
    cap() >= level
}

/// Whether the AVX2 kernels may use AVX-VNNI (`vpdpbusd` on 256-bit
/// registers): allowed by the cap and present on this CPU.
#[cfg(target_arch = "x86_64")]
pub fn avx_vnni() -> bool {
    allows(Isa::AvxVnni) && std::arch::is_x86_feature_detected!("avxvnni")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_values() {
        assert_eq!(Isa::parse("scalar"), Some(Isa::Scalar));
        assert_eq!(Isa::parse(" AVX2 "), Some(Isa::Avx2));
        assert_eq!(Isa::parse("avxvnni"), Some(Isa::AvxVnni));
        assert_eq!(Isa::parse("avx512"), Some(Isa::Avx512));
        assert_eq!(Isa::parse("sse9"), None);
        assert!(Isa::Scalar < Isa::Avx2 && Isa::Avx2 < Isa::AvxVnni && Isa::AvxVnni < Isa::Avx512);
    }

    /// Under a cap (scripts/test.sh runs the kernel tests under
    /// `MLXR_CPU_ISA=avxvnni`, `avx2` and `scalar`), the paths above it are
    /// off.
    #[test]
    fn the_cap_turns_faster_paths_off() {
        use super::super::TileKernels;
        if cap() < Isa::Avx512 {
            assert!(!super::super::q4k_tiles::available());
            assert_ne!(TileKernels::detect(), Some(TileKernels::Avx512Vnni));
        }
        // Under `avx2` on an AVX2 machine the AVX2 tile kernels are the ones
        // the tile tests run.
        #[cfg(target_arch = "x86_64")]
        if matches!(cap(), Isa::Avx2 | Isa::AvxVnni) && super::super::dot::x86::available() {
            assert_eq!(TileKernels::detect(), Some(TileKernels::Avx2));
        }
        #[cfg(target_arch = "x86_64")]
        if cap() < Isa::AvxVnni {
            assert!(!avx_vnni());
        }
        #[cfg(target_arch = "x86_64")]
        if cap() < Isa::Avx2 {
            assert!(!super::super::dot::x86::available());
            assert_eq!(TileKernels::detect(), None);
            assert!(!crate::backend::cpu::paged::vector::avx2_fma_available());
        }
    }
}
