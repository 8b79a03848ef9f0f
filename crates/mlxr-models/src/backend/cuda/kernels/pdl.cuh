// Programmatic dependent launch (sm_90; launch.rs): a kernel launched with
// the attribute may start while the kernel before it in the stream ends.
// Ours let the next kernel start at once (pdl_trigger), then wait
// (pdl_wait) for the one before to finish and its writes to be visible
// before they read or write anything: what overlaps is the launch and the
// blocks' scheduling. Asking L2 for the weights before the wait made the
// matmuls slower (bench/results/gpu-2026-12-06-s51.md). Both are no-ops in
// a kernel launched without the attribute.
#pragma once
#include <stdint.h>

__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
