/* blockcheck: checks the allocated layer of a snapshot.
 *
 *   blockcheck SNAP [--blocks N | --min-blocks N] [--reserved] [--vmm]
 *
 * Every block_alloc / block_free event must carry a stack id defined earlier
 * in the file; block frees must match live block allocs (no duplicates, none
 * live at the end unless --allow-live).  --blocks N: exactly N block_alloc
 * events; --min-blocks N: at least N.  --reserved: the reserved layer is
 * there too (cuMemAlloc "alloc" events or vmm_map events).  --vmm: vmm_map
 * events are present.  Prints the counts and "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/u64map.h"
#include "../check.h"
#include "memsnap/format.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: blockcheck SNAP [--blocks N|--min-blocks N] [--reserved] [--vmm] "
                        "[--allow-live]\n");
        return 2;
    }
    long want = -1, want_min = -1;
    int reserved = 0, vmm = 0, allow_live = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            want = atol(argv[++i]);
        else if (!strcmp(argv[i], "--min-blocks") && i + 1 < argc)
            want_min = atol(argv[++i]);
        else if (!strcmp(argv[i], "--reserved"))
            reserved = 1;
        else if (!strcmp(argv[i], "--vmm"))
            vmm = 1;
        else if (!strcmp(argv[i], "--allow-live"))
            allow_live = 1;
        else {
            fprintf(stderr, "blockcheck: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    char err[512];
    msnap_reader *r = msnap_reader_open(argv[1], err, sizeof err);
    if (!r) {
        fprintf(stderr, "blockcheck: %s\n", err);
        return 2;
    }
    u64map stacks = {0}, live = {0};
    long nalloc = 0, nfree = 0, nostack = 0, dup = 0, unknown = 0, segs = 0, maps = 0;
    msnap_record rec;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        if (rec.type == MSNAP_REC_STACK) {
            u64map_put(&stacks, 0, rec.u.stack.id, 1);
            continue;
        }
        if (rec.type != MSNAP_REC_EVENT)
            continue;
        const msnap_event *e = &rec.u.event;
        if (e->action == MSNAP_A_ALLOC)
            segs++;
        if (e->action == MSNAP_A_VMM_MAP)
            maps++;
        if (e->action != MSNAP_A_BLOCK_ALLOC && e->action != MSNAP_A_BLOCK_FREE)
            continue;
        if (!e->stack || !u64map_get(&stacks, 0, e->stack))
            nostack++;
        uint64_t key = e->addr ^ ((uint64_t)(uint16_t)e->device << 56);
        if (e->action == MSNAP_A_BLOCK_ALLOC) {
            nalloc++;
            if (u64map_get(&live, 0, key))
                dup++;
            u64map_put(&live, 0, key, e->size ? e->size : 1);
        } else {
            nfree++;
            uint64_t sz;
            if (!u64map_del(&live, 0, key, &sz))
                unknown++;
        }
    }
    if (rc < 0) {
        fprintf(stderr, "blockcheck: %s: %s\n", argv[1], msnap_reader_error(r));
        check_failed_++;
    }
    msnap_reader_close(r);
    printf("blockcheck: %ld block_alloc, %ld block_free, %ld without stack, %ld duplicate, "
           "%ld unknown frees, %zu live at end; reserved layer: %ld alloc, %ld vmm_map\n",
           nalloc, nfree, nostack, dup, unknown, live.n, segs, maps);
    CHECK(nostack == 0);
    CHECK(dup == 0);
    CHECK(unknown == 0);
    if (!allow_live)
        CHECK(live.n == 0);
    if (want >= 0)
        CHECK(nalloc == want);
    if (want_min >= 0)
        CHECK(nalloc >= want_min);
    if (reserved)
        CHECK(segs + maps > 0);
    if (vmm)
        CHECK(maps > 0);
    u64map_free(&stacks);
    u64map_free(&live);
    return check_summary();
}
