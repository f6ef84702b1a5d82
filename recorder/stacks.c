/* Loading libmemsnap_stacks.so (stacks.h): from the folder of the real
 * libmemsnap.so (symbolic links resolved: the Python package's build tree
 * links to the build's lib/), with RTLD_LOCAL so that its libraries
 * (libunwind, elfutils) are visible to it alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recorder.h"
#include "stacks.h"

const memsnap_stacks_api *g_stacks_api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc = -1;
static int load_quiet;

/* The folder of this library's real file into out; 0, or -1. */
static int own_real_dir(char *out, size_t cap)
{
    Dl_info di;
    char real[PATH_MAX];
    if (!dladdr((void *)&own_real_dir, &di) || !di.dli_fname || !realpath(di.dli_fname, real))
        return -1;
    char *slash = strrchr(real, '/');
    if (!slash)
        return -1;
    *slash = 0;
    if ((size_t)snprintf(out, cap, "%s", real) >= cap)
        return -1;
    return 0;
}

static void load_once(void)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    const char *why = "cannot find the folder of libmemsnap.so";
    if (own_real_dir(dir, sizeof dir) == 0) {
        snprintf(path, sizeof path, "%s/" MEMSNAP_STACKS_LIB, dir);
        void *h = core_dlopen(path, RTLD_NOW | RTLD_LOCAL);
        memsnap_stacks_api_fn fn = h ? (memsnap_stacks_api_fn)dlsym(h, "memsnap_stacks_table") : NULL;
        const memsnap_stacks_api *api = fn ? fn() : NULL;
        if (api && api->size >= sizeof(memsnap_stacks_api) &&
            api->version == MEMSNAP_STACKS_API_VERSION) {
            g_stacks_api = api;    /* kept loaded for the life of the process */
            load_rc = 0;
            return;
        }
        why = h ? "it is not this recorder's" : dlerror();
        if (h)
            core_dlclose(h);
    }
    if (!load_quiet)
        fprintf(stderr, "memsnap: %s: %s; recording without native frames or symbols\n",
                MEMSNAP_STACKS_LIB, why ? why : "cannot be loaded");
}

int stacks_load(int quiet)
{
    load_quiet = quiet;
    pthread_once(&once, load_once);
    return load_rc;
}
