/* statecmp: one event sequence through the recorder's path and the
 * reader's, compared (issue 29: the state model is written once).
 *
 *   statecmp SNAP
 *
 * SNAP is a ring dump that kept every event (nothing dropped).  The
 * recorder's writer kept its live set as the events went by: it filled in
 * each free's size from the object the free removed, and its `live` lines
 * (the dump's state section) are what it held at the dump.  Here the same
 * events go through the reader's state model (format/state.h), and:
 *   - each free, unmap or release that removed an object carries that
 *     object's size (the writer's fill-in agrees with the reader's object);
 *   - the live set the reader ends with is the writer's live lines, object
 *     for object (kind, address or handle, size, device, stack).
 * Prints one line per disagreement and "statecmp: N live objects, N frees
 * agree"; exits 1 on any disagreement, 2 on bad input.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/state.h"
#include "memsnap/format.h"

/* The key space of an allocation kind, as the state model keys it. */
static int space_of(int kind)
{
    switch (kind) {
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_MANAGED_ALLOC:
    case MSNAP_A_HOST_ALLOC: return MSNAP_SP_MEM;
    case MSNAP_A_BLOCK_ALLOC: return MSNAP_SP_BLOCK;
    case MSNAP_A_VMM_RESERVE: return MSNAP_SP_VA;
    case MSNAP_A_VMM_CREATE: return MSNAP_SP_PHYS;
    case MSNAP_A_VMM_MAP: return MSNAP_SP_MAP;
    default: return 0;
    }
}

static int is_free(int a)
{
    return a == MSNAP_A_FREE || a == MSNAP_A_ASYNC_FREE || a == MSNAP_A_HOST_FREE ||
           a == MSNAP_A_BLOCK_FREE || a == MSNAP_A_VMM_RELEASE;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: statecmp SNAP\n");
        return 2;
    }
    char err[512];
    msnap_reader *rd = msnap_reader_open(argv[1], err, sizeof err);
    if (!rd) {
        fprintf(stderr, "statecmp: %s\n", err);
        return 2;
    }
    msnap_state st;
    msnap_state_init(&st);
    msnap_live *lines = NULL;
    size_t nlines = 0, cap = 0;
    long bad = 0, frees = 0, dropped = -1, events = 0;
    int in_state = 0, rc;
    msnap_record r;
    while ((rc = msnap_reader_next(rd, &r)) == 1) {
        if (r.type == MSNAP_REC_STATE_BEGIN) {
            in_state = 1;
            nlines = 0;   /* the last section is the dump's */
        } else if (r.type == MSNAP_REC_LIVE && in_state) {
            if (nlines == cap) {
                cap = cap ? cap * 2 : 64;
                lines = realloc(lines, cap * sizeof *lines);
                if (!lines)
                    return 2;
            }
            lines[nlines++] = r.u.live;
        } else if (r.type == MSNAP_REC_EVENT) {
            const msnap_event *e = &r.u.event;
            events++;
            if (msnap_state_event(&st, e)) {
                fprintf(stderr, "statecmp: out of memory\n");
                return 2;
            }
            if (is_free(e->action) && st.freed.kind) {
                frees++;
                if (e->size != st.freed.size) {
                    printf("event %ld (%s at 0x%llx): the recorder filled in %llu bytes, the "
                           "reader's object has %llu\n", events, msnap_action_name(e->action),
                           (unsigned long long)(e->action == MSNAP_A_VMM_RELEASE ? e->aux : e->addr),
                           (unsigned long long)e->size, (unsigned long long)st.freed.size);
                    bad++;
                }
            }
        } else if (r.type == MSNAP_REC_TRAILER) {
            dropped = (long)r.u.trailer.dropped;
        }
        if (r.type != MSNAP_REC_LIVE && r.type != MSNAP_REC_STATE_BEGIN &&
            r.type != MSNAP_REC_STACK && r.type != MSNAP_REC_MODULE &&
            r.type != MSNAP_REC_SYMBOL && r.type != MSNAP_REC_STR)
            in_state = 0;
    }
    if (rc < 0) {
        fprintf(stderr, "statecmp: %s\n", msnap_reader_error(rd));
        return 2;
    }
    if (dropped != 0) {
        fprintf(stderr, "statecmp: the dump must keep every event (trailer dropped %ld)\n",
                dropped);
        return 2;
    }
    /* every live line is a live object of the reader's, alike */
    size_t matched = 0;
    for (size_t i = 0; i < nlines; i++) {
        const msnap_live *l = &lines[i];
        int sp = space_of(l->kind);
        uint64_t key = sp == MSNAP_SP_PHYS ? l->aux : l->addr;
        const msnap_obj *o = sp ? msnap_state_find(&st, sp, key) : NULL;
        int slot = l->kind == MSNAP_A_HOST_ALLOC ? MSNAP_ST_HOST : msnap_st_slot(l->device);
        if (!o) {
            printf("the recorder's live %s at 0x%llx (%llu bytes) is not live for the reader\n",
                   msnap_action_name(l->kind), (unsigned long long)key,
                   (unsigned long long)l->size);
            bad++;
        } else if (o->kind != l->kind || o->size != l->size || o->device != slot ||
                   o->stack != l->stack) {
            printf("%s at 0x%llx: the recorder's is %llu bytes on device %d, stack %u; the "
                   "reader's %llu bytes on slot %d, stack %u\n", msnap_action_name(l->kind),
                   (unsigned long long)key, (unsigned long long)l->size, l->device, l->stack,
                   (unsigned long long)o->size, o->device, o->stack);
            bad++;
        } else {
            matched++;
        }
    }
    /* and the reader holds nothing more */
    size_t nlive = st.map.n;
    if (nlive != nlines) {
        printf("the reader holds %zu live objects, the recorder's dump %zu\n", nlive, nlines);
        for (size_t i = 0; i < st.map.cap; i++) {
            if (!st.map.slots[i].used)
                continue;
            const msnap_obj *o = &st.objs[st.map.slots[i].value];
            int found = 0;
            for (size_t k = 0; k < nlines && !found; k++)
                found = lines[k].kind == o->kind &&
                        (o->space == MSNAP_SP_PHYS ? lines[k].aux == o->aux
                                                   : lines[k].addr == o->addr);
            if (!found)
                printf("  the reader's live %s at 0x%llx (%llu bytes) is not in the dump\n",
                       msnap_action_name(o->kind),
                       (unsigned long long)(o->space == MSNAP_SP_PHYS ? o->aux : o->addr),
                       (unsigned long long)o->size);
        }
        bad++;
    }
    printf("statecmp: %zu live objects, %ld frees agree%s\n", matched, frees,
           bad ? "; disagreements above" : "");
    free(lines);
    msnap_state_free(&st);
    msnap_reader_close(rd);
    return bad ? 1 : 0;
}
