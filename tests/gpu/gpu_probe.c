/* gpu_probe: exit 0 when a real CUDA GPU is usable, 77 (ctest's "skipped")
 * otherwise.  Uses the real driver only: the simulated device says its name. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef int (*init_t)(unsigned);
typedef int (*count_t)(int *);
typedef int (*name_t)(char *, int, int);

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("SKIP: no CUDA driver (libcuda.so.1)\n");
        return 77;
    }
    init_t init = (init_t)dlsym(h, "cuInit");
    count_t count = (count_t)dlsym(h, "cuDeviceGetCount");
    name_t name = (name_t)dlsym(h, "cuDeviceGetName");
    int n = 0;
    char buf[128] = "";
    if (!init || !count || !name || init(0) != 0 || count(&n) != 0 || n < 1 ||
        name(buf, sizeof buf, 0) != 0) {
        printf("SKIP: no usable CUDA GPU\n");
        return 77;
    }
    if (strstr(buf, "simulated")) {
        printf("SKIP: only the simulated device is on the library path\n");
        return 77;
    }
    printf("GPU: %s\n", buf);
    return 0;
}
