/* cudrv.c: fills the workloads' driver table (cudrv.h) from libcuda.so.1.
 *
 * This file needs the driver names themselves (as field names and as dlsym
 * strings), so it turns cudrv.h's renames off and looks each name up with
 * dlsym on the dlopen handle.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define CUDRV_NO_RENAMES
#include "cudrv.h"

cudrv_table cudrv;

static int load_rc = 1;          /* 1 = not tried yet; then 0 or -1 */
static char load_why[256];

int cudrv_load(char *why, size_t len)
{
    if (load_rc == 1) {
        cudrv_table t;
        load_rc = -1;
        /* RTLD_GLOBAL: the driver is in the global scope, as when linked. */
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(load_why, sizeof load_why,
                     "no CUDA driver: cannot load libcuda.so.1 (%s)", e ? e : "not found");
            goto out;
        }
#define CUDRV_LOOKUP(f)                                                             \
        *(void **)&t.f = dlsym(h, #f);                                              \
        if (!t.f) {                                                                 \
            snprintf(load_why, sizeof load_why, "libcuda.so.1 has no %s", #f);     \
            goto out;                                                               \
        }
        CUDRV_FUNCS(CUDRV_LOOKUP)
#undef CUDRV_LOOKUP
        cudrv = t;
        load_rc = 0;
    }
out:
    if (load_rc != 0 && why && len)
        snprintf(why, len, "%s", load_why);
    return load_rc;
}
