/* Finding memsnap's run-time parts from the binary's own folder; the
 * order and the layouts are in parts.h.  The installed layout's relative
 * paths come from CMake (GNUInstallDirs), so they follow a custom libdir. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parts.h"

#ifndef MEMSNAP_BIN_TO_PKGLIB
#define MEMSNAP_BIN_TO_PKGLIB "../lib/memsnap"
#endif
#ifndef MEMSNAP_BIN_TO_LIB
#define MEMSNAP_BIN_TO_LIB "../lib"
#endif
#ifndef MEMSNAP_ALLOC_SONAME
#define MEMSNAP_ALLOC_SONAME "libmemsnap_alloc.so"
#endif

typedef struct part_places {
    const char *env;
    const char *installed;   /* relative to the binary's folder */
    const char *build_tree;  /* relative to the binary's folder */
    int is_dir;              /* a folder that must hold libcuda.so.1 */
} part_places;

static const part_places places[] = {
    [MEMSNAP_PART_RECORDER] = {"MEMSNAP_LIB", MEMSNAP_BIN_TO_PKGLIB "/libmemsnap.so",
                               "../lib/libmemsnap.so", 0},
    [MEMSNAP_PART_SIMDEV_DIR] = {"MEMSNAP_SIMDEV_DIR", MEMSNAP_BIN_TO_PKGLIB "/simdev",
                                 "../simdev", 1},
    [MEMSNAP_PART_ALLOC] = {"MEMSNAP_ALLOC_LIB", MEMSNAP_BIN_TO_LIB "/" MEMSNAP_ALLOC_SONAME,
                            "../lib/libmemsnap_alloc.so", 0},
};

/* 1 when path is what part needs: a regular file, or a folder with
 * libcuda.so.1 in it. */
static int present(const char *path, int is_dir)
{
    struct stat st;
    if (!is_dir)
        return stat(path, &st) == 0 && S_ISREG(st.st_mode);
    char probe[PATH_MAX + 16];
    snprintf(probe, sizeof probe, "%s/libcuda.so.1", path);
    return stat(probe, &st) == 0 && S_ISREG(st.st_mode);
}

/* Folder of this executable into dir; 0, or -1. */
static int self_dir(char *dir, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash || (size_t)(slash - exe) + 1 > cap)
        return -1;
    *slash = 0;
    memcpy(dir, exe, (size_t)(slash - exe) + 1);
    return 0;
}

/* Contract in parts.h. */
const char *memsnap_part_env(memsnap_part part)
{
    return places[part].env;
}

/* Contract in parts.h. */
int memsnap_part_find(memsnap_part part, char *out, size_t cap)
{
    const part_places *p = &places[part];
    const char *e = getenv(p->env);
    if (e && *e) {
        snprintf(out, cap, "%s", e);
        return present(out, p->is_dir) ? 0 : -1;
    }
    char dir[PATH_MAX];
    if (self_dir(dir, sizeof dir) != 0) {
        snprintf(out, cap, "(the memsnap binary's folder)");
        return -1;
    }
    snprintf(out, cap, "%s/%s", dir, p->installed);
    if (present(out, p->is_dir))
        return 0;
    char first[PATH_MAX + 64];
    snprintf(first, sizeof first, "%s", out);
    snprintf(out, cap, "%s/%s", dir, p->build_tree);
    if (present(out, p->is_dir))
        return 0;
    snprintf(out, cap, "%s", first);   /* the installed place, for the message */
    return -1;
}
