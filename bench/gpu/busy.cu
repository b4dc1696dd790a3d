// Keeps the GPU busy for a known time with a known amount of memory allocated: the ground truth the
// NVML check (nvml_check.py) reads against.   nvcc -O2 -o busy busy.cu && ./busy MIB SECONDS
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void spin(float *data, long long cycles) {
    long long start = clock64();
    float x = threadIdx.x;
    while (clock64() - start < cycles) x = x * 0.999f + 1.0f;
    data[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? atol(argv[1]) : 2048;
    double seconds = argc > 2 ? atof(argv[2]) : 8;
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    float *memory;
    if (cudaMalloc(&memory, mib << 20) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); return 1; }
    int blocks = prop.multiProcessorCount * 4, threads = 256;
    int khz = 0;  // cudaDeviceProp.clockRate is gone in CUDA 13: ask for the attribute
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    long long cycles = (long long)(0.1 * khz * 1000.0);  // ~100 ms per launch
    printf("busy: %zu MiB, %d blocks x %d threads for %.0f s\n", mib, blocks, threads, seconds);
    fflush(stdout);
    for (int i = 0; i < (int)(seconds * 10); i++) spin<<<blocks, threads>>>(memory, cycles);
    cudaDeviceSynchronize();
    cudaFree(memory);
    return 0;
}
