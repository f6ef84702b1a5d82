/* A CUDA-runtime program (cudart, linked statically or shared: two builds
 * of this file), for the case cudart-sim: on the simulated device every
 * runtime call fails with cudaErrorNotSupported (801), and the simulated
 * device says once why.  Prints each call's result; exit 0 whatever they
 * return, so that the program's own behaviour can be checked unchanged. */
#include <cuda_runtime_api.h>
#include <stdio.h>

int main(void)
{
    int n = -1;
    void *p = NULL;
    printf("cudaGetDeviceCount %d\n", (int)cudaGetDeviceCount(&n));
    printf("cudaMalloc %d\n", (int)cudaMalloc(&p, 1 << 20));
    printf("cudaFree %d\n", (int)cudaFree(p));
    return 0;
}
