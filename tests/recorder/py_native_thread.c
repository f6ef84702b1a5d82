/* A helper library for the Python-frames tests: native_thread_alloc() starts
 * a thread that has no Python thread state -- what a C extension's worker
 * thread is -- and allocates and frees device memory on it through the
 * driver, while the calling Python thread keeps the GIL (it is called
 * through ctypes.PyDLL).  The recorder must give that thread's events native
 * frames only. */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*alloc_fn)(uint64_t *, size_t);
typedef int (*free_fn)(uint64_t);

/* Thread body: arg points at the byte count; returns NULL on success. */
static void *body(void *arg)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
        return arg;
    retain_fn retain = (retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
    set_fn set = (set_fn)dlsym(lib, "cuCtxSetCurrent");
    alloc_fn alloc = (alloc_fn)dlsym(lib, "cuMemAlloc_v2");
    free_fn release = (free_fn)dlsym(lib, "cuMemFree_v2");
    void *ctx = NULL;
    uint64_t p = 0;
    if (!retain || !set || !alloc || !release || retain(&ctx, 0) || set(ctx) ||
        alloc(&p, *(size_t *)arg) || release(p))
        return arg;
    return NULL;
}

/* Runs body on a new thread and waits for it.  0 ok, -1 on any failure. */
int native_thread_alloc(size_t n)
{
    pthread_t t;
    void *rc = &n;
    if (pthread_create(&t, NULL, body, &n) != 0 || pthread_join(t, &rc) != 0)
        return -1;
    return rc ? -1 : 0;
}
