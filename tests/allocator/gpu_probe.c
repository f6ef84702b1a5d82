/* gpu_probe: exit 0 when a real NVIDIA GPU is usable, 77 (ctest: skipped)
 * otherwise, with one line saying why.  It does not link to libcuda: it
 * dlopens libcuda.so.1, so a machine without a driver is a skip, not a loader
 * error.  It refuses the memsnap simulated device (it exports
 * memsnap_sim_fail, and names itself "memsnap simulated device"): GPU tests
 * must never pass on the simulation by accident. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("SKIP: no CUDA driver (%s)\n", dlerror());
        return 77;
    }
    if (dlsym(h, "memsnap_sim_fail")) {
        printf("SKIP: libcuda.so.1 is the memsnap simulated device, not a GPU "
               "(remove build/simdev from LD_LIBRARY_PATH)\n");
        return 77;
    }
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(h, "cuDeviceGetCount");
    CUresult (*name)(char *, int, CUdevice) = (CUresult(*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetName");
    if (!init || !count || !name) {
        printf("SKIP: libcuda.so.1 lacks cuInit/cuDeviceGetCount/cuDeviceGetName\n");
        return 77;
    }
    CUresult rc = init(0);
    if (rc != CUDA_SUCCESS) {
        printf("SKIP: cuInit failed (%d): no usable GPU\n", (int)rc);
        return 77;
    }
    int n = 0;
    if (count(&n) != CUDA_SUCCESS || n < 1) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    char buf[256] = "";
    name(buf, sizeof buf, 0);
    if (strstr(buf, "memsnap simulated device")) {
        printf("SKIP: device 0 is the memsnap simulated device\n");
        return 77;
    }
    printf("GPU: %s (%d device%s)\n", buf, n, n > 1 ? "s" : "");
    return 0;
}
