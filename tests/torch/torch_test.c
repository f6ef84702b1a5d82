/* The program side of the PyTorch-layer tests on the simulated device.
 *
 *   torch_test api
 *       calls memsnap_trace_torch (found with dlsym, as the plugin's caller
 *       would) once per action, plus two it must ignore, and prints what the
 *       snapshot must hold as "key value" lines for cases.sh;
 *   torch_test api2
 *       the plugin's other entry point (format 1.2): memsnap_torch_node_id
 *       and memsnap_trace_torch2 as PyTorch's forward thread (sequence
 *       numbers, no node) and an autograd thread (MmBackward0 twice with
 *       the same id, AccumulateGrad without a number) would call them, with
 *       frees that pass a node and a number too (not kept) and a free of
 *       unknown size (taken from the allocation); prints the ids;
 *   torch_test ws-backward
 *       the autograd thread's first matmul making cuBLAS's workspace (32
 *       MiB, inside a function with the exported (mangled) name of
 *       PyTorch's at::cuda::getCurrentCUDABlasHandle(), which the recorder
 *       looks up) and a gradient of the same size beside it, both under
 *       node MmBackward0 and both kept;
 *   torch_test ws-fallback LIB
 *       the same with the workspace made inside fake_getNewWorkspace of LIB
 *       (libtorch_cuda_wsfake.so: a libtorch_cuda without the names the
 *       recorder looks up, found by reading its symbols);
 *   torch_test c10 LIBC10 N EXIT
 *       dlopens LIBC10 (a fake libc10_cuda.so), makes N allocations through
 *       it, frees all but the last, prints "first 0xADDR", exits with EXIT.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>

#include "memsnap/memsnap.h"

static int init_device(void)
{
    CUdevice d;
    CUcontext c;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) {
        fprintf(stderr, "torch_test: no (simulated) device\n");
        return -1;
    }
    return 0;
}

static int run_api(void)
{
    memsnap_trace_torch_fn fn = (memsnap_trace_torch_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch");
    if (!fn) {
        fprintf(stderr, "torch_test: memsnap_trace_torch not found (recorder not loaded?)\n");
        return 1;
    }
    CUdeviceptr seg;
    if (cuMemAlloc_v2(&seg, 4 << 20) != CUDA_SUCCESS)
        return 1;
    uint64_t s = 0x5000;                 /* a stream handle */
    fn(MEMSNAP_TORCH_SEGMENT_ALLOC, 0, seg, 4 << 20, s, 0, 0);
    fn(MEMSNAP_TORCH_ALLOC, 0, seg, 1000, s, 7, 1000);
    fn(MEMSNAP_TORCH_ALLOC, 0, seg + 4096, 2048, s, 0, 2048);
    fn(MEMSNAP_TORCH_FREE_REQUESTED, 0, seg, 1000, s, 0, 0);
    fn(MEMSNAP_TORCH_FREE_COMPLETED, 0, seg, 1000, s, 0, 0);
    /* a private pool's pages (format 1.3: segments name their pool too) */
    fn(MEMSNAP_TORCH_SEGMENT_MAP, 0, seg + (2 << 20), 2 << 20, s, 0x300000005ull, 0);
    fn(MEMSNAP_TORCH_SEGMENT_UNMAP, 0, seg + (2 << 20), 2 << 20, s, 0x100000005ull, 0);
    fn(7, 0, 0, 0, 0, 0, 0);             /* PyTorch's SNAPSHOT marker: ignored */
    fn(99, 0, seg, 1, 0, 0, 0);          /* unknown: ignored */
    fn(-1, 0, seg, 1, 0, 0, 0);
    fn(MEMSNAP_TORCH_OOM, 0, 12345, 1ull << 40, s, 0, 0);
    printf("seg %llu\nlive %llu\n", (unsigned long long)seg, (unsigned long long)seg + 4096);
    fn(MEMSNAP_TORCH_SEGMENT_FREE, 0, seg, 4 << 20, s, 0, 0);
    return 0;
}

static memsnap_trace_torch2_fn trace2;
static memsnap_torch_node_id_fn node_id;
static CUdeviceptr seg2;
static uint32_t mm_id, mm_id2, acc_id;

/* PyTorch's autograd thread: no Python, nodes being evaluated. */
static void *backward_thread(void *arg)
{
    (void)arg;
    uint64_t s = 0x5000;
    mm_id = node_id("MmBackward0");
    acc_id = node_id("AccumulateGrad");
    mm_id2 = node_id("MmBackward0");
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg2 + 8192, 4096, s, 0, 4000, 43, mm_id);
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg2 + 16384, 1024, s, 0, 1024, 0, acc_id);
    trace2(MEMSNAP_TORCH_FREE_REQUESTED, 0, seg2 + 8192, 4096, s, 0, 0, 43, mm_id);
    trace2(MEMSNAP_TORCH_FREE_COMPLETED, 0, seg2 + 8192, 0, s, 0, 0, 43, mm_id);
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg2 + 8192, 512, s, 0, 100, 44, mm_id2);
    return NULL;
}

static int run_api2(void)
{
    trace2 = (memsnap_trace_torch2_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch2");
    node_id = (memsnap_torch_node_id_fn)dlsym(RTLD_DEFAULT, "memsnap_torch_node_id");
    if (!trace2 || !node_id) {
        fprintf(stderr, "torch_test: memsnap_trace_torch2 not found (recorder not loaded?)\n");
        return 1;
    }
    if (cuMemAlloc_v2(&seg2, 4 << 20) != CUDA_SUCCESS)
        return 1;
    uint64_t s = 0x5000;
    /* the forward thread: grad mode on, nodes 41 and 42 made before its outputs */
    trace2(MEMSNAP_TORCH_SEGMENT_ALLOC, 0, seg2, 4 << 20, s, 0, 0, 42, 0);
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg2, 1536, s, 0, 1500, 42, 0);
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg2 + 4096, 512, s, 0, 8, 43, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, backward_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    /* a free of unknown size (0): the recorder takes the allocation's */
    trace2(MEMSNAP_TORCH_FREE_REQUESTED, 0, seg2, 0, s, 0, 0, 0, 0);
    trace2(MEMSNAP_TORCH_FREE_COMPLETED, 0, seg2, 0, s, 0, 0, 0, 0);
    printf("seg %llu\nmm %u\nmm2 %u\nacc %u\nnull %u\n", (unsigned long long)seg2, mm_id,
           mm_id2, acc_id, node_id(""));
    return 0;
}

/* PyTorch's at::cuda::getCurrentCUDABlasHandle with getNewWorkspace and
 * setWorkspaceForHandle inlined: the workspace's block is made under it.
 * Its name is the C++ one's, mangled, as libtorch_cuda.so exports it. */
__attribute__((visibility("default"), noinline)) void
_ZN2at4cuda24getCurrentCUDABlasHandleEv(uint64_t addr, uint32_t node)
{
    trace2(MEMSNAP_TORCH_ALLOC, 0, addr, 32 << 20, 0x5000, 0, 32 << 20, 51, node);
    __asm__ volatile("" ::: "memory");   /* not a tail call */
}

static CUdeviceptr seg3;

/* The function that makes the workspace: the handle getter above, or a
 * library's (ws-fallback). */
static void (*make_ws)(uint64_t addr, uint32_t node) = _ZN2at4cuda24getCurrentCUDABlasHandleEv;

static void *ws_backward_thread(void *arg)
{
    (void)arg;
    uint32_t mm = node_id("MmBackward0");
    make_ws(seg3, mm);
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg3 + (32 << 20), 32 << 20, 0x5000, 0, 32 << 20, 51, mm);
    return NULL;
}

static int run_ws_backward(void)
{
    trace2 = (memsnap_trace_torch2_fn)dlsym(RTLD_DEFAULT, "memsnap_trace_torch2");
    node_id = (memsnap_torch_node_id_fn)dlsym(RTLD_DEFAULT, "memsnap_torch_node_id");
    if (!trace2 || !node_id) {
        fprintf(stderr, "torch_test: memsnap_trace_torch2 not found (recorder not loaded?)\n");
        return 1;
    }
    if (cuMemAlloc_v2(&seg3, 80 << 20) != CUDA_SUCCESS)
        return 1;
    trace2(MEMSNAP_TORCH_SEGMENT_ALLOC, 0, seg3, 80 << 20, 0x5000, 0, 0, 0, 0);
    /* the forward: the matmul's output, made with sequence number 51 */
    trace2(MEMSNAP_TORCH_ALLOC, 0, seg3 + (64 << 20), 1 << 20, 0x5000, 0, 1 << 20, 51, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, ws_backward_thread, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    printf("seg %llu\n", (unsigned long long)seg3);
    return 0;
}

/* ws-backward with the workspace made inside LIB's fake_getNewWorkspace. */
static void (*fake_ws)(memsnap_trace_torch2_fn, uint64_t, uint32_t);

static void fake_make_ws(uint64_t addr, uint32_t node)
{
    fake_ws(trace2, addr, node);
}

static int run_ws_fallback(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    fake_ws = h ? (void (*)(memsnap_trace_torch2_fn, uint64_t, uint32_t))dlsym(
                      h, "fake_getNewWorkspace")
                : NULL;
    if (!fake_ws) {
        fprintf(stderr, "torch_test: %s\n", h ? "no fake_getNewWorkspace" : dlerror());
        return 1;
    }
    make_ws = fake_make_ws;
    return run_ws_backward();
}

static int run_c10(const char *lib, int n, int code)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "torch_test: %s\n", dlerror());
        return 1;
    }
    uint64_t (*c10_malloc)(size_t) = (uint64_t (*)(size_t))dlsym(h, "fake_c10_malloc");
    void (*c10_free)(uint64_t, size_t) = (void (*)(uint64_t, size_t))dlsym(h, "fake_c10_free");
    if (!c10_malloc || !c10_free)
        return 1;
    uint64_t last = 0;
    for (int i = 0; i < n; i++) {
        uint64_t p = c10_malloc(1 << 20);
        if (!p)
            return 1;
        if (i == 0)
            printf("first %llu\n", (unsigned long long)p);
        if (i + 1 < n)
            c10_free(p, 1 << 20);
        last = p;
    }
    printf("last %llu\nn %d\n", (unsigned long long)last, n);
    fflush(stdout);
    return code;
}

int main(int argc, char **argv)
{
    if (init_device() != 0)
        return 1;
    if (argc == 2 && strcmp(argv[1], "api") == 0)
        return run_api();
    if (argc == 2 && strcmp(argv[1], "api2") == 0)
        return run_api2();
    if (argc == 2 && strcmp(argv[1], "ws-backward") == 0)
        return run_ws_backward();
    if (argc == 3 && strcmp(argv[1], "ws-fallback") == 0)
        return run_ws_fallback(argv[2]);
    if (argc == 5 && strcmp(argv[1], "c10") == 0)
        return run_c10(argv[2], atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: torch_test api | api2 | ws-backward | ws-fallback LIB | c10 LIBC10 N EXIT\n");
    return 2;
}
