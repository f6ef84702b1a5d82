// gpu_cudart: a CUDA runtime program for the recorder's GPU tests.  Built
// twice: with nvcc's default static cudart (gpu_cudart_static) and with the
// shared one (gpu_cudart_shared, as PyTorch uses).  Each cudaMalloc & co ends
// in one driver call that the recorder must see exactly once, whichever way
// cudart found the driver (static cudart: dlopen + cuGetProcAddress).
//
// It prints "expect ACTION N" lines for snapcheck and exits 0 when every CUDA
// call succeeded and a kernel wrote the memory it was given.
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>

#define OK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            std::fprintf(stderr, "gpu_cudart: %s: %s (line %d)\n", #x,         \
                         cudaGetErrorString(e_), __LINE__);                    \
            std::exit(1);                                                      \
        }                                                                      \
    } while (0)

__global__ void fill(float *p, size_t n, float v)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = v;
}

static void __attribute__((noinline)) allocate_step(int rounds)
{
    for (int r = 0; r < rounds; r++) {
        float *a, *b;
        OK(cudaMalloc(&a, (1 + r) << 20));
        OK(cudaMalloc(&b, 3 << 20));
        fill<<<((1 + r) << 18) / 256, 256>>>(a, (size_t)(1 + r) << 18, 1.0f);
        OK(cudaGetLastError());
        OK(cudaFree(b));
        OK(cudaFree(a));
    }
}

int main()
{
    OK(cudaSetDevice(0));
    allocate_step(5);                               // 10 alloc, 10 free

    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++) {                   // 4 async_alloc, 4 async_free
        void *p;
        OK(cudaMallocAsync(&p, 1 << 20, s));
        fill<<<1024, 256>>>((float *)p, 1 << 18, 2.0f);
        OK(cudaFreeAsync(p, s));
    }
    OK(cudaStreamSynchronize(s));

    void *h;
    OK(cudaMallocHost(&h, 1 << 20));                // host_alloc 1
    OK(cudaFreeHost(h));                            // host_free 1
    float *m;
    OK(cudaMallocManaged(&m, 1 << 20));             // managed_alloc 1
    fill<<<1024, 256>>>(m, 1 << 18, 3.0f);
    OK(cudaDeviceSynchronize());
    int ok = m[12345] == 3.0f;
    OK(cudaFree(m));                                // free 1
    void *pp;
    size_t pitch;
    OK(cudaMallocPitch(&pp, &pitch, 1000, 100));    // alloc 1
    OK(cudaFree(pp));                               // free 1
    float *keep;
    OK(cudaMalloc(&keep, 7 << 20));                 // alloc 1, live at exit

    // The cudaGetDriverEntryPointByVersion route: driver pointers from cudart.
    void *fa = nullptr, *ff = nullptr;
    cudaDriverEntryPointQueryResult qa, qf;
    OK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fa, 12000, cudaEnableDefault, &qa));
    OK(cudaGetDriverEntryPointByVersion("cuMemFree", &ff, 12000, cudaEnableDefault, &qf));
    if (!fa || !ff || qa != cudaDriverEntryPointSuccess || qf != cudaDriverEntryPointSuccess) {
        std::fprintf(stderr, "gpu_cudart: cudaGetDriverEntryPointByVersion failed\n");
        return 1;
    }
    CUdeviceptr d;
    if (((CUresult (*)(CUdeviceptr *, size_t))fa)(&d, 5 << 20) != CUDA_SUCCESS ||  // alloc 1
        ((CUresult (*)(CUdeviceptr))ff)(d) != CUDA_SUCCESS) {                      // free 1
        std::fprintf(stderr, "gpu_cudart: cuMemAlloc/cuMemFree through entry points failed\n");
        return 1;
    }
    OK(cudaStreamDestroy(s));
    std::printf("expect alloc 13\nexpect free 13\nexpect async_alloc 4\nexpect async_free 4\n"
                "expect host_alloc 1\nexpect host_free 1\nexpect managed_alloc 1\n"
                "expect oom 0\n");
    if (!ok) {
        std::fprintf(stderr, "gpu_cudart: the kernel did not write managed memory\n");
        return 1;
    }
    return 0;
}
