//! With the `cuda` feature: compiles the CUDA backend's kernels to PTX
//! (nvcc from `CUDA_HOME`/`CUDA_PATH` or the PATH; target `sm_$CUDA_COMPUTE_CAP`,
//! default 80: the driver JIT-compiles PTX for any newer GPU).

use std::path::PathBuf;
use std::process::Command;

const KERNELS: &[&str] = &[
    "src/backend/cuda/kernels/decoded_matvec.cu",
    "src/backend/cuda/kernels/flash_prefill.cu",
    "src/backend/cuda/kernels/half_matvec.cu",
    "src/backend/cuda/kernels/mmq.cu",
    "src/backend/cuda/kernels/paged_attention.cu",
    "src/backend/cuda/kernels/quant_matmul.cu",
    "src/backend/cuda/kernels/rope.cu",
];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo::rerun-if-changed=src/backend/cuda/kernels/q8_k.cuh");
    println!("cargo::rerun-if-changed=src/backend/cuda/kernels/k_quants.cuh");
    println!("cargo::rerun-if-changed=src/backend/cuda/kernels/pdl.cuh");
    println!("cargo::rerun-if-changed=src/backend/cuda/kernels/matvec.cuh");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    let nvcc = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(|home| PathBuf::from(home).join("bin/nvcc"))
        .find(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("nvcc"));
    for kernel in KERNELS {
        println!("cargo::rerun-if-changed={kernel}");
        let stem = PathBuf::from(kernel).file_stem().unwrap().to_owned();
        let ptx = out.join(stem).with_extension("ptx");
        let status = Command::new(&nvcc)
            .args(["--ptx", "-O3", "--use_fast_math", "-std=c++17"])
            .arg(format!("-arch=sm_{cap}"))
            .arg("-o")
            .arg(&ptx)
            .arg(kernel)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "running {}: {e} (install CUDA or see scripts/build-cuda.sh)",
                    nvcc.display()
                )
            });
        assert!(status.success(), "nvcc failed on {kernel}");
    }
}
