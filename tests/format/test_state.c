/* Tests of the state model (format/state.h).
 *
 * 1. Rules on small hand-made sequences: the three-event reserved example
 *    (a cuMemAlloc, a cuMemAllocAsync, its free: reserved peaks at 9 MiB at
 *    the second event), a refused free put back once, an unmap across
 *    several mappings and its refusal, unknown frees, block_free_requested.
 * 2. A property test: random event sequences fed to the state and to a
 *    tiny reference written here from the rules in state.h (a flat list of
 *    objects, levels recomputed from scratch after every event) agree on
 *    every layer's current and peak, per slot and for the process, after
 *    every event.
 */
#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "format/state.h"

#define MiB (1024ull * 1024)

static msnap_event ev(int action, uint64_t t, int dev, uint64_t addr,
                      uint64_t size, uint64_t aux)
{
    msnap_event e = {.t_ns = t, .addr = addr, .size = size, .aux = aux,
                     .action = (uint16_t)action, .device = (int16_t)dev,
                     .tid = 1};
    return e;
}

static void test_three_events(void)
{
    msnap_state st;
    msnap_state_init(&st);
    msnap_event e1 = ev(MSNAP_A_ALLOC, 1000, 0, 0x1000000, 1 * MiB, 0);
    msnap_event e2 = ev(MSNAP_A_ASYNC_ALLOC, 2000, 0, 0x2000000, 8 * MiB, 0);
    msnap_event e3 = ev(MSNAP_A_ASYNC_FREE, 3000, 0, 0x2000000, 0, 0);
    CHECK(msnap_state_event(&st, &e1) == 0);
    CHECK(msnap_state_event(&st, &e2) == 0);
    CHECK(msnap_state_event(&st, &e3) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].peak, 9 * MiB);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].peak_t, 2000);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].peak_ev, 2);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 1 * MiB);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_ASYNC].peak, 8 * MiB);
    CHECK_EQ_U64(msnap_state_peak(&st, -1, MSNAP_LAYER_RESERVED), 9 * MiB);
    CHECK_EQ_U64(st.freed.size, 8 * MiB);
    CHECK(!st.allocated_seen);
    msnap_state_free(&st);
}

static void test_refused_free(void)
{
    msnap_state st;
    msnap_state_init(&st);
    msnap_event a = ev(MSNAP_A_ALLOC, 1, 0, 0x1000, 4096, 0);
    a.stack = 7;
    msnap_event f = ev(MSNAP_A_FREE, 2, 0, 0x1000, 0, 0);
    f.api = MSNAP_API_cuMemFree_v2;
    msnap_event x = ev(MSNAP_A_FREE_ERROR, 3, 0, 0x1000, 0, 0);
    x.api = MSNAP_API_cuMemFree_v2;
    CHECK(msnap_state_event(&st, &a) == 0);
    CHECK(msnap_state_event(&st, &f) == 0);
    CHECK(msnap_state_event(&st, &x) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 4096);
    CHECK_EQ_U64(st.nsites, 1);
    CHECK_EQ_U64(st.sites[0].count, 1);     /* put back, not allocated twice */
    CHECK_EQ_U64(st.sites[0].bytes, 4096);
    CHECK_EQ_U64(st.sites[0].live, 4096);
    CHECK_EQ_U64(st.restored, 1);
    /* A second free_error has nothing left to undo. */
    CHECK(msnap_state_event(&st, &x) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 4096);
    /* Another thread's free_error does not match. */
    CHECK(msnap_state_event(&st, &f) == 0);
    x.tid = 2;
    CHECK(msnap_state_event(&st, &x) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 0);
    msnap_state_free(&st);
}

static void test_unmap_several(void)
{
    msnap_state st;
    msnap_state_init(&st);
    uint64_t base = 0x10000000;
    msnap_event r = ev(MSNAP_A_VMM_RESERVE, 1, 0, base, 64 * MiB, 0);
    CHECK(msnap_state_event(&st, &r) == 0);
    for (int i = 0; i < 3; i++) {
        msnap_event c = ev(MSNAP_A_VMM_CREATE, 2, 0, 0, 2 * MiB, 100 + i);
        msnap_event m = ev(MSNAP_A_VMM_MAP, 3, 0, base + i * 2 * MiB, 2 * MiB, 100 + i);
        CHECK(msnap_state_event(&st, &c) == 0);
        CHECK(msnap_state_event(&st, &m) == 0);
    }
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_VMM_MAPPED].cur, 6 * MiB);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 6 * MiB);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_VMM_VA].cur, 64 * MiB);
    msnap_event u = ev(MSNAP_A_VMM_UNMAP, 4, 0, base, 4 * MiB, 0);
    u.api = MSNAP_API_cuMemUnmap;
    CHECK(msnap_state_event(&st, &u) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_VMM_MAPPED].cur, 2 * MiB);
    msnap_event x = ev(MSNAP_A_FREE_ERROR, 5, 0, base, 0, 0);
    x.api = MSNAP_API_cuMemUnmap;
    CHECK(msnap_state_event(&st, &x) == 0);   /* both mappings come back */
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_VMM_MAPPED].cur, 6 * MiB);
    msnap_event u0 = ev(MSNAP_A_VMM_UNMAP, 6, 0, base + 4 * MiB, 0, 0);
    CHECK(msnap_state_event(&st, &u0) == 0);  /* size 0: the one at p */
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_VMM_MAPPED].cur, 4 * MiB);
    msnap_state_free(&st);
}

static void test_unknown_and_requested(void)
{
    msnap_state st;
    msnap_state_init(&st);
    msnap_event b = ev(MSNAP_A_BLOCK_ALLOC, 1, 0, 0x5000, 512, 0);
    msnap_event q = ev(MSNAP_A_BLOCK_FREE_REQUESTED, 2, 0, 0x5000, 512, 0);
    msnap_event u = ev(MSNAP_A_FREE, 3, 0, 0x9000, 1 * MiB, 0);
    msnap_event s = ev(MSNAP_A_SEGMENT_ALLOC, 4, 0, 0x9000, 2 * MiB, 0);
    CHECK(msnap_state_event(&st, &b) == 0);
    CHECK(msnap_state_event(&st, &q) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_ALLOCATED].cur, 512);
    CHECK(st.allocated_seen);
    CHECK(msnap_state_event(&st, &u) == 0);
    CHECK(msnap_state_event(&st, &s) == 0);
    CHECK_EQ_U64(st.unknown_frees, 1);
    CHECK_EQ_U64(st.npre, 1);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 0);
    /* A second read starts with the pre-window 1 MiB live. */
    CHECK(msnap_state_rewind(&st) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 1 * MiB);
    CHECK(msnap_state_event(&st, &b) == 0);
    CHECK(msnap_state_event(&st, &q) == 0);
    CHECK(msnap_state_event(&st, &u) == 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].cur, 0);
    CHECK_EQ_U64(st.lv[0][MSNAP_LAYER_RESERVED].peak, 1 * MiB);
    CHECK_EQ_U64(st.unknown_frees, 0);
    msnap_state_free(&st);
}

/* ---- the reference ---------------------------------------------------- */

#define REF_MAX 4096
typedef struct robj { int space, kind, slot; uint64_t key, size; } robj;
typedef struct rfree { robj o; uint64_t serial; uint32_t tid; int valid; } rfree;

static robj live[REF_MAX];
static int nlive;
static rfree frees[REF_MAX * 8];
static int nfrees;

static int ref_find(int space, uint64_t key)
{
    for (int i = 0; i < nlive; i++)
        if (live[i].space == space && live[i].key == key)
            return i;
    return -1;
}

static int ref_take(int space, uint64_t key, robj *out)
{
    int i = ref_find(space, key);
    if (i < 0)
        return 0;
    *out = live[i];
    live[i] = live[--nlive];
    return 1;
}

static void ref_add(robj o)
{
    robj old;
    ref_take(o.space, o.key, &old);
    live[nlive++] = o;
}

static void ref_free(int space, uint64_t key, uint64_t serial, uint32_t tid,
                     robj *got)
{
    got->size = 0;
    if (ref_take(space, key, got))
        frees[nfrees++] = (rfree){*got, serial, tid, 1};
}

static int slot_of(int d) { return d >= 0 && d < MSNAP_MAX_DEVICES ? d : MSNAP_ST_HOST; }

static void ref_event(const msnap_event *e, uint64_t serial)
{
    int slot = slot_of(e->device);
    robj o = {0, e->action, slot, e->addr, e->size}, got;
    switch (e->action) {
    case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_MANAGED_ALLOC:
        o.space = 1; ref_add(o); break;
    case MSNAP_A_HOST_ALLOC: o.space = 1; o.slot = MSNAP_ST_HOST; ref_add(o); break;
    case MSNAP_A_BLOCK_ALLOC: o.space = 2; ref_add(o); break;
    case MSNAP_A_VMM_RESERVE: o.space = 3; ref_add(o); break;
    case MSNAP_A_VMM_CREATE: o.space = 4; o.key = e->aux; ref_add(o); break;
    case MSNAP_A_VMM_MAP: o.space = 5; ref_add(o); break;
    case MSNAP_A_FREE: case MSNAP_A_ASYNC_FREE: case MSNAP_A_HOST_FREE:
        ref_free(1, e->addr, serial, e->tid, &got); break;
    case MSNAP_A_BLOCK_FREE: ref_free(2, e->addr, serial, e->tid, &got); break;
    case MSNAP_A_VMM_ADDR_FREE: ref_free(3, e->addr, serial, e->tid, &got); break;
    case MSNAP_A_VMM_RELEASE: ref_free(4, e->aux, serial, e->tid, &got); break;
    case MSNAP_A_VMM_UNMAP: {
        uint64_t a = e->addr;
        for (;;) {
            ref_free(5, a, serial, e->tid, &got);
            if (!got.size)
                break;
            a += got.size;
            if (a >= e->addr + e->size || ref_find(5, a) < 0)
                break;
        }
        break;
    }
    case MSNAP_A_FREE_ERROR: {
        int want = e->api == MSNAP_API_cuMemRelease ? 4
                 : e->api == MSNAP_API_cuMemUnmap ? 5
                 : e->api == MSNAP_API_cuMemAddressFree ? 3 : 1;
        uint64_t key = want == 4 ? e->aux : e->addr;
        int lo = nfrees > MSNAP_ST_UNDO ? nfrees - MSNAP_ST_UNDO : 0;
        for (int i = nfrees - 1; i >= lo; i--) {
            if (!frees[i].valid || frees[i].tid != e->tid ||
                frees[i].o.space != want || frees[i].o.key != key)
                continue;
            for (int j = nfrees - 1; j >= lo; j--)
                if (frees[j].valid && frees[j].serial == frees[i].serial &&
                    frees[j].tid == e->tid) {
                    frees[j].valid = 0;
                    if (ref_find(frees[j].o.space, frees[j].o.key) < 0)
                        live[nlive++] = frees[j].o;
                }
            break;
        }
        break;
    }
    }
}

/* Current level of a layer on a slot (-1: every slot), from scratch. */
static uint64_t ref_level(int slot, int layer)
{
    uint64_t sum = 0;
    for (int i = 0; i < nlive; i++) {
        const robj *o = &live[i];
        if (slot >= 0 && o->slot != slot)
            continue;
        int in = 0;
        switch (layer) {
        case MSNAP_LAYER_RESERVED:
            in = o->kind == MSNAP_A_ALLOC || o->kind == MSNAP_A_ASYNC_ALLOC ||
                 o->kind == MSNAP_A_MANAGED_ALLOC ||
                 (o->kind == MSNAP_A_VMM_CREATE && o->slot != MSNAP_ST_HOST);
            break;
        case MSNAP_LAYER_ALLOCATED: in = o->kind == MSNAP_A_BLOCK_ALLOC; break;
        case MSNAP_LAYER_ASYNC: in = o->kind == MSNAP_A_ASYNC_ALLOC; break;
        case MSNAP_LAYER_MANAGED: in = o->kind == MSNAP_A_MANAGED_ALLOC; break;
        case MSNAP_LAYER_PINNED: in = o->kind == MSNAP_A_HOST_ALLOC; break;
        case MSNAP_LAYER_VMM_VA: in = o->kind == MSNAP_A_VMM_RESERVE; break;
        case MSNAP_LAYER_VMM_MAPPED: in = o->kind == MSNAP_A_VMM_MAP; break;
        }
        if (in)
            sum += o->size;
    }
    return sum;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

/* A random event over a small address pool so that keys collide. */
static msnap_event random_event(uint64_t t)
{
    static const int acts[] = {
        MSNAP_A_ALLOC, MSNAP_A_FREE, MSNAP_A_ASYNC_ALLOC, MSNAP_A_ASYNC_FREE,
        MSNAP_A_MANAGED_ALLOC, MSNAP_A_HOST_ALLOC, MSNAP_A_HOST_FREE,
        MSNAP_A_BLOCK_ALLOC, MSNAP_A_BLOCK_FREE, MSNAP_A_BLOCK_FREE_REQUESTED,
        MSNAP_A_VMM_RESERVE, MSNAP_A_VMM_ADDR_FREE, MSNAP_A_VMM_CREATE,
        MSNAP_A_VMM_RELEASE, MSNAP_A_VMM_MAP, MSNAP_A_VMM_UNMAP,
        MSNAP_A_FREE_ERROR, MSNAP_A_FREE_ERROR, MSNAP_A_SEGMENT_ALLOC,
        MSNAP_A_OOM};
    static const int devs[] = {0, 1, -1};
    static const int free_apis[] = {MSNAP_API_cuMemFree_v2, MSNAP_API_cuMemRelease,
                                    MSNAP_API_cuMemUnmap, MSNAP_API_cuMemAddressFree};
    int a = acts[rnd(sizeof acts / sizeof acts[0])];
    msnap_event e = ev(a, t, devs[rnd(3)], 0x100000 * (1 + rnd(12)),
                       (1 + rnd(4)) * 0x100000, 1 + rnd(6));
    e.tid = (uint32_t)(1 + rnd(2));
    e.stack = (uint32_t)rnd(5);
    if (a == MSNAP_A_FREE || a == MSNAP_A_ASYNC_FREE || a == MSNAP_A_HOST_FREE ||
        a == MSNAP_A_BLOCK_FREE || a == MSNAP_A_VMM_ADDR_FREE)
        e.size = rnd(2) ? 0 : e.size;
    if (a == MSNAP_A_VMM_UNMAP)
        e.size = rnd(4) * 0x100000;
    if (a == MSNAP_A_FREE_ERROR)
        e.api = (uint16_t)free_apis[rnd(4)];
    return e;
}

static void test_property(void)
{
    int mismatches = 0;
    for (int run = 0; run < 200 && mismatches < 5; run++) {
        msnap_state st;
        msnap_state_init(&st);
        nlive = nfrees = 0;
        uint64_t peak[MSNAP_ST_NDEV + 1][MSNAP_LAYER_COUNT];
        memset(peak, 0, sizeof peak);
        for (int i = 1; i <= 300 && mismatches < 5; i++) {
            msnap_event e = random_event((uint64_t)i);
            CHECK(msnap_state_event(&st, &e) == 0);
            ref_event(&e, (uint64_t)i);
            for (int s = -1; s < MSNAP_ST_NDEV; s += (s == 1 ? MSNAP_ST_NDEV - 2 : 1)) {
                for (int l = 0; l < MSNAP_LAYER_COUNT; l++) {
                    uint64_t cur = ref_level(s, l);
                    uint64_t *pk = &peak[s + 1][l];
                    if (cur > *pk)
                        *pk = cur;
                    const msnap_level *v = s < 0 ? &st.all[l] : &st.lv[s][l];
                    if (v->cur != cur || v->peak != *pk) {
                        mismatches++;
                        fprintf(stderr, "run %d event %d (%s) slot %d %s: "
                                "state cur %llu peak %llu, reference %llu %llu\n",
                                run, i, msnap_action_name(e.action), s,
                                msnap_layer_name(l),
                                (unsigned long long)v->cur,
                                (unsigned long long)v->peak,
                                (unsigned long long)cur,
                                (unsigned long long)*pk);
                    }
                }
            }
        }
        msnap_state_free(&st);
    }
    CHECK(mismatches == 0);
}

int main(void)
{
    test_three_events();
    test_refused_free();
    test_unmap_several();
    test_unknown_and_requested();
    test_property();
    return check_summary();
}
