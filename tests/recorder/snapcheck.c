/* snapcheck: checks a recorded snapshot against what the program said it did.
 *
 *   snapcheck SNAP [EXPECT_FILE] [options]
 *
 * EXPECT_FILE holds lines "expect ACTION N" (route_test's stdout; other lines
 * are ignored): the snapshot must hold exactly N events of ACTION ("live N":
 * the last state block lists exactly N device allocations).  Options:
 *   --balanced       every free matches an earlier live allocation at that
 *                    address, no address is allocated twice while live, and
 *                    nothing allocated with cuMemAlloc is live at the end
 *   --stacks         every alloc/free event carries a stack that the file
 *                    defines before the event
 *   --sym NAME       some "sym" record names a function containing NAME
 *   --truncated      the file must read as truncated (SIGKILL tests)
 *   --min-events N   at least N events (any action)
 *   --min-counters N at least N "counters" lines for device 0
 *   --trailer        a trailer must be present (clean exit)
 *   --marks          print "mark MESSAGE reserved=BYTES" at each nvtx_mark
 *   --owner-marks SUBSTR
 *                    at each mark whose message ends in "reserved N", the
 *                    device-0 reserved bytes (cuMemAlloc/Pitch + cuMemCreate
 *                    live) made from a stack that passes through a module
 *                    whose path contains SUBSTR must equal N (PyTorch's
 *                    allocator lives in libc10_cuda.so; cuBLAS allocates its
 *                    own workspace, which torch does not count)
 * Prints one line per failed check and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memsnap/format.h"
#include "../check.h"
#include "util/u64map.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: snapcheck SNAP [EXPECT_FILE] [options]\n");
        return 2;
    }
    const char *snap = argv[1];
    const char *expect_file = NULL;
    int balanced = 0, stacks = 0, want_trunc = 0, want_trailer = 0, marks = 0;
    long min_events = -1, min_counters = -1, counters = 0;
    const char *sym = NULL, *owner = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--balanced")) balanced = 1;
        else if (!strcmp(argv[i], "--stacks")) stacks = 1;
        else if (!strcmp(argv[i], "--truncated")) want_trunc = 1;
        else if (!strcmp(argv[i], "--trailer")) want_trailer = 1;
        else if (!strcmp(argv[i], "--marks")) marks = 1;
        else if (!strcmp(argv[i], "--sym") && i + 1 < argc) sym = argv[++i];
        else if (!strcmp(argv[i], "--owner-marks") && i + 1 < argc) owner = argv[++i];
        else if (!strcmp(argv[i], "--min-events") && i + 1 < argc) min_events = atol(argv[++i]);
        else if (!strcmp(argv[i], "--min-counters") && i + 1 < argc) min_counters = atol(argv[++i]);
        else if (argv[i][0] != '-') expect_file = argv[i];
        else {
            fprintf(stderr, "snapcheck: unknown option %s\n", argv[i]);
            return 2;
        }
    }

    char err[512];
    msnap_reader *r = msnap_reader_open(snap, err, sizeof err);
    if (!r) {
        fprintf(stderr, "snapcheck: %s\n", err);
        return 2;
    }
    long count[MSNAP_A_COUNT] = {0};
    long events = 0, live_last = -1, live_cur = 0, sym_found = 0, trailer = 0;
    long dup_alloc = 0, unknown_free = 0, missing_stack = 0;
    u64map live = {0}, stack_ids = {0};
    /* --owner-marks: module ranges, owned stacks, strings, owned live objects */
    uint64_t mod_lo[512], mod_hi[512];
    int nmod = 0;
    u64map owned_stack = {0}, owned_live = {0}, strs = {0};
    uint64_t owned = 0, other = 0;
    long marks_checked = 0, marks_bad = 0;
    uint64_t reserved = 0;
    int in_state = 0;
    msnap_record rec;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        switch (rec.type) {
        case MSNAP_REC_STACK:
            u64map_put(&stack_ids, 0, rec.u.stack.id, 1);
            if (owner) {
                int own = 0;
                for (int i = 0; i < rec.u.stack.depth && !own; i++)
                    for (int m = 0; m < nmod; m++)
                        if (rec.u.stack.ips[i] >= mod_lo[m] && rec.u.stack.ips[i] < mod_hi[m])
                            own = 1;
                u64map_put(&owned_stack, 0, rec.u.stack.id, (uint64_t)own);
            }
            break;
        case MSNAP_REC_MODULE:
            if (owner && nmod < 512 && strstr(rec.u.module.path, owner)) {
                mod_lo[nmod] = rec.u.module.base;
                mod_hi[nmod++] = rec.u.module.base + rec.u.module.size;
            }
            break;
        case MSNAP_REC_STR:
            if (owner)
                u64map_put(&strs, 0, rec.u.str.id, (uint64_t)(uintptr_t)strdup(rec.u.str.s));
            break;
        case MSNAP_REC_SYMBOL:
            if (sym && rec.u.symbol.function && strstr(rec.u.symbol.function, sym))
                sym_found++;
            break;
        case MSNAP_REC_STATE_BEGIN:
            in_state = 1;
            live_cur = 0;
            break;
        case MSNAP_REC_LIVE:
            if (rec.u.live.kind == MSNAP_A_ALLOC || rec.u.live.kind == MSNAP_A_MANAGED_ALLOC ||
                rec.u.live.kind == MSNAP_A_ASYNC_ALLOC)
                live_cur++;
            break;
        case MSNAP_REC_TRAILER:
            trailer++;
            break;
        case MSNAP_REC_COUNTERS:
            if (rec.u.counters.device == 0)
                counters++;
            break;
        case MSNAP_REC_EVENT: {
            const msnap_event *e = &rec.u.event;
            if (in_state) {
                live_last = live_cur;
                in_state = 0;
            }
            events++;
            if (e->action < MSNAP_A_COUNT)
                count[e->action]++;
            if (owner && e->device <= 0) {
                /* Reserved bytes by owner: alloc/free and vmm_create/release. */
                uint64_t *o;
                int own = (o = u64map_get(&owned_stack, 0, e->stack)) && *o;
                uint64_t key = 0, val;
                int add = 0, del = 0;
                if (e->action == MSNAP_A_ALLOC) { key = e->addr; add = 1; }
                else if (e->action == MSNAP_A_FREE) { key = e->addr; del = 1; }
                else if (e->action == MSNAP_A_VMM_CREATE && e->device == 0) { key = e->aux | (1ull << 63); add = 1; }
                else if (e->action == MSNAP_A_VMM_RELEASE) { key = e->aux | (1ull << 63); del = 1; }
                if (add) {
                    u64map_put(&owned_live, (uint32_t)own, key, e->size);
                    *(own ? &owned : &other) += e->size;
                } else if (del) {
                    if (u64map_del(&owned_live, 1, key, &val)) owned -= val;
                    else if (u64map_del(&owned_live, 0, key, &val)) other -= val;
                }
                if (e->action == MSNAP_A_NVTX_MARK && (o = u64map_get(&strs, 0, e->aux))) {
                    const char *msg = (const char *)(uintptr_t)*o;
                    const char *r = strstr(msg, "reserved ");
                    if (r) {
                        unsigned long long want = strtoull(r + 9, NULL, 10);
                        marks_checked++;
                        int ok = owned == want;
                        if (!ok)
                            marks_bad++;
                        printf("%s %-40s %s bytes %12llu, want %12llu; other owners %llu\n",
                               ok ? "ok  " : "FAIL", msg, owner, (unsigned long long)owned, want,
                               (unsigned long long)other);
                    }
                }
            }
            int is_alloc = e->action == MSNAP_A_ALLOC || e->action == MSNAP_A_MANAGED_ALLOC ||
                           e->action == MSNAP_A_ASYNC_ALLOC;
            int is_free = e->action == MSNAP_A_FREE || e->action == MSNAP_A_ASYNC_FREE;
            if (stacks && (is_alloc || is_free) &&
                (e->stack == 0 || !u64map_get(&stack_ids, 0, e->stack)))
                missing_stack++;
            if (is_alloc) {
                if (u64map_get(&live, 0, e->addr))
                    dup_alloc++;
                u64map_put(&live, 0, e->addr, e->size);
                if (e->action == MSNAP_A_ALLOC)
                    reserved += e->size;
            } else if (is_free) {
                uint64_t sz;
                if (!u64map_del(&live, 0, e->addr, &sz))
                    unknown_free++;
                else if (e->action == MSNAP_A_FREE && e->size == sz)
                    reserved -= sz;
                else if (e->action == MSNAP_A_FREE)
                    reserved -= sz;
            } else if (e->action == MSNAP_A_FREE_ERROR) {
                /* The free before it did not happen (docs/format.md). */
            } else if (e->action == MSNAP_A_NVTX_MARK && marks) {
                printf("mark %llu reserved=%llu\n", (unsigned long long)e->aux,
                       (unsigned long long)reserved);
            }
            break;
        }
        default:
            break;
        }
    }
    if (in_state)
        live_last = live_cur;
    if (rc < 0) {
        fprintf(stderr, "snapcheck: %s: %s\n", snap, msnap_reader_error(r));
        check_failed_++;
    }
    int truncated = msnap_reader_truncated(r);
    msnap_reader_close(r);

    if (expect_file) {
        FILE *f = fopen(expect_file, "r");
        if (!f) {
            fprintf(stderr, "snapcheck: cannot open %s\n", expect_file);
            return 2;
        }
        char line[256], name[64];
        long n;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "expect %63s %ld", name, &n) != 2)
                continue;
            long got;
            if (!strcmp(name, "live")) {
                got = live_last;
            } else {
                int a = msnap_action_from_name(name);
                if (a < 0) {
                    fprintf(stderr, "snapcheck: unknown action %s\n", name);
                    check_failed_++;
                    continue;
                }
                got = count[a];
            }
            if (got != n)
                fprintf(stderr, "snapcheck: %s: %ld events, expected %ld\n", name, got, n);
            CHECK(got == n);
        }
        fclose(f);
    }
    if (balanced) {
        if (dup_alloc || unknown_free || live.n)
            fprintf(stderr, "snapcheck: duplicate allocs %ld, unknown frees %ld, live at end %zu\n",
                    dup_alloc, unknown_free, live.n);
        CHECK(dup_alloc == 0);
        CHECK(unknown_free == 0);
        CHECK(live.n == 0);
    }
    if (stacks) {
        if (missing_stack)
            fprintf(stderr, "snapcheck: %ld events without a defined stack\n", missing_stack);
        CHECK(missing_stack == 0);
    }
    if (sym) {
        if (!sym_found)
            fprintf(stderr, "snapcheck: no symbol contains '%s'\n", sym);
        CHECK(sym_found > 0);
    }
    if (owner) {
        if (!marks_checked)
            fprintf(stderr, "snapcheck: no mark with \"reserved N\" found\n");
        CHECK(marks_checked > 0);
        CHECK(marks_bad == 0);
        for (size_t i = 0; i < strs.cap; i++)
            if (strs.slots[i].used)
                free((void *)(uintptr_t)strs.slots[i].value);
        u64map_free(&strs);
        u64map_free(&owned_stack);
        u64map_free(&owned_live);
    }
    if (want_trunc)
        CHECK(truncated);
    if (want_trailer) {
        if (!trailer)
            fprintf(stderr, "snapcheck: no trailer\n");
        CHECK(trailer > 0);
    }
    if (min_events >= 0) {
        if (events < min_events)
            fprintf(stderr, "snapcheck: %ld events, expected at least %ld\n", events, min_events);
        CHECK(events >= min_events);
    }
    if (min_counters >= 0) {
        if (counters < min_counters)
            fprintf(stderr, "snapcheck: %ld counters lines, expected at least %ld\n", counters,
                    min_counters);
        CHECK(counters >= min_counters);
    }
    printf("snapcheck: %ld events, %s\n", events, truncated ? "truncated" : "complete");
    u64map_free(&live);
    u64map_free(&stack_ids);
    return check_summary();
}
