/* The modules of the calling process, as snapshot "module" records
 * (symbolize.h: msnap_self_modules).  A file of its own: it needs no
 * elfutils, so the recorder links it without pulling libdw in
 * (recorder/stacks.h). */
#define _GNU_SOURCE
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbolize.h"

typedef struct self_walk {
    int (*fn)(const msnap_module *, void *);
    void *ctx;
    int rc;
    int first;
} self_walk;

/* Reads the NT_GNU_BUILD_ID note of a loaded object as hex into out
 * ("" when none). */
static void loaded_build_id(const struct dl_phdr_info *info, char *out,
                            size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p =
            (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            const unsigned char *next = desc + ((nh->n_descsz + 3) & ~3u);
            if (next > end)
                break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                memcmp(name, "GNU", 4) == 0) {
                size_t n = 0;
                for (uint32_t k = 0; k < nh->n_descsz && n + 3 <= cap; k++)
                    n += (size_t)snprintf(out + n, cap - n, "%02x", desc[k]);
                return;
            }
            p = next;
        }
    }
}

/* dl_iterate_phdr callback: builds an msnap_module and hands it on. */
static int self_module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    self_walk *w = arg;
    char exe[PATH_MAX];
    const char *path = info->dlpi_name;
    int first = w->first;
    w->first = 0;
    if (!path || !*path) {
        if (!first)
            return 0; /* unnamed object other than the executable */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return 0;
        exe[n] = '\0';
        path = exe;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0; /* the vDSO, or a file deleted since it was loaded */
    uint64_t extent = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && ph->p_vaddr + ph->p_memsz > extent)
            extent = ph->p_vaddr + ph->p_memsz;
    }
    char abs[PATH_MAX];
    if (path[0] != '/' && realpath(path, abs))
        path = abs;
    char bid[129];
    loaded_build_id(info, bid, sizeof bid);
    msnap_module m = {.base = info->dlpi_addr,
                      .size = extent,
                      .path = path,
                      .build_id = bid};
    w->rc = w->fn(&m, w->ctx);
    return w->rc;
}

int msnap_self_modules(int (*fn)(const msnap_module *m, void *ctx),
                       void *ctx)
{
    if (!fn)
        return -1;
    self_walk w = {.fn = fn, .ctx = ctx, .rc = 0, .first = 1};
    dl_iterate_phdr(self_module_cb, &w);
    return w.rc;
}
