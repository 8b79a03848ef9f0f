// The bench harnesses' check of every CUDA runtime call: print and exit.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                   \
    do {                                                                           \
        cudaError_t e = (x);                                                       \
        if (e != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,              \
                    cudaGetErrorString(e));                                        \
            exit(1);                                                               \
        }                                                                          \
    } while (0)
