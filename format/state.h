/* The one state model: what is live, per device and layer, as events come
 * in order.  It sits beside the format, below both halves, and needs only
 * the format's header and the map (util/u64map.h):
 *
 *   the recording side  the recorder's writer thread (recorder/writer.c)
 *                       keeps its live set in it: a free's size and device
 *                       come from the object it removed, the ring dump's
 *                       `live` lines are its objects;
 *   the reading side    the analysis library's one read (analyze/analysis.c)
 *                       feeds it every event of a file, and every command
 *                       observes it: `memsnap summary` (analyze/summary.c,
 *                       report.c), the findings model behind render, compare
 *                       and flame (analyze/model.c), the exporters
 *                       (interop/track.c), the what-if request stream
 *                       (whatif/requests.c).
 *
 * So a rule about what an event does to live memory is written once, here,
 * and the file a recording leaves says what its readers compute
 * (tests/recorder/statecmp.c holds the two to one answer).
 *
 * Layers (docs/format.md, "Layers", is the reference; one definition each):
 *
 *   RESERVED   device memory the process holds from the driver: cuMemAlloc/
 *              Pitch + cuMemCreate located on a device + stream-ordered
 *              (async) allocations + managed allocations.  Pool memory of
 *              cuMemAllocAsync counts: the program cannot give it to anyone
 *              else while it is live.  segment_* events (an allocator's own
 *              view) do not change it.
 *   ALLOCATED  allocator blocks: block_alloc .. block_free (memsnap's
 *              allocator and PyTorch's).  block_free_requested keeps the
 *              block allocated.  Seen only when the file has block events.
 *   ASYNC      the stream-ordered part of RESERVED.
 *   MANAGED    the managed part of RESERVED.
 *   PINNED     pinned host memory (host_alloc), process-wide: it lives in
 *              the host slot MSNAP_ST_HOST whatever the event's device.
 *   VMM_VA     address space reserved with cuMemAddressReserve (no memory).
 *   VMM_MAPPED bytes mapped with cuMemMap (the memory is the cuMemCreate
 *              handle's, counted in RESERVED).
 *
 * Live objects.  Each live object sits in one key space: MEM (alloc,
 * async_alloc, managed_alloc, host_alloc by address: a cuMemFree may free
 * device or managed memory, so they share one), BLOCK (by address), VA (by
 * address), PHYS (cuMemCreate by handle), MAP (by address).  An allocation
 * at a key already live replaces the old object (counted in reused).
 *
 * Rules, in one place:
 *   - A free removes its object; the freed object goes into an undo ring of
 *     MSNAP_ST_UNDO entries.  A free_error (the driver refused the free just
 *     recorded, docs/format.md "Order of frees") puts back the most recent
 *     undo entry with the same thread, the same key (x for cuMemRelease, p
 *     otherwise) and the key space of its API; all mappings that one unmap
 *     removed come back together.  A restored object is not a new
 *     allocation: its site's count and bytes do not move.
 *   - vmm_unmap removes the mapping at p and then each neighbouring mapping
 *     that starts where the previous one ended, while inside [p, p+n); with
 *     n = 0 only the mapping at p.
 *   - A free of a key not live (unknown memory) counts in unknown_frees;
 *     levels do not move.  When the event has a size it is kept as a
 *     pre-window object: memory live before the first recorded event.
 *   - state/live lines (a ring dump's state section; the last section
 *     wins): at msnap_state_finish, each live line whose object the replay
 *     does not hold becomes a pre-window object too.  A reader that wants
 *     the true levels of a window reads twice: msnap_state_rewind, then the
 *     same records again (the rewind seeds the pre-window objects).
 *   - Sites: one key rule, (stack id, site layer, device slot).  The site
 *     layer of an object is RESERVED for device memory (alloc, async,
 *     managed, device cuMemCreate), ALLOCATED for blocks, PINNED for host
 *     memory; address space and mappings have no site.  So a ranking of
 *     sites is always within one layer.
 *   - Peaks: every level keeps its peak, the time and the event index
 *     where it was first reached.  all[] is the sum over every slot at one
 *     moment (the process).  counters lines (ring mode keeps them for the
 *     whole run) are folded in by msnap_state_peak: the higher wins.
 *
 * Observers: before and after every level change the state calls the
 * observer (when set) with the object and the sign (+1 added, -1 removed),
 * so the renderer can bucket pixel columns and the leak finder can watch
 * sites without a rule of its own.  The observer must not change the state.
 *
 * Ownership: the state owns its arrays; pointers into objs/sites are valid
 * until the next call that feeds it.  Not thread-safe.
 *
 * The recorder's writer (recorder/writer.c) keeps its live set here with
 * no_sites set: it runs on the writer thread beside the program and needs
 * the live objects (a free's size, the dump's live lines) and, through an
 * observer, its per-device counters, not the sites.
 *
 * Why a refused free is undone by thread and key, and not by key alone:
 * the hot path commits a free before the driver call, and the free_error
 * that follows when the driver refuses it comes from the same call, so on
 * the same thread, after that thread's free of that key.  Between the two,
 * other threads go on: another thread's free of the same key (a double
 * free racing) may sit in the undo ring later than ours, and the key alone
 * would put back that one.  The latest undo entry of the same thread, same
 * key and same key space is the free this free_error answers.  And an
 * unmap the driver refused removed nothing in the driver: every mapping
 * that event removed here comes back (the writer's own table once put back
 * only the first: tests/recorder case refused-frees).
 */
#ifndef MEMSNAP_FORMAT_STATE_H
#define MEMSNAP_FORMAT_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "memsnap/format.h"
#include "util/u64map.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(enum, name as printed and in JSON) */
#define MSNAP_LAYERS(X)                          \
    X(MSNAP_LAYER_RESERVED, "reserved")          \
    X(MSNAP_LAYER_ALLOCATED, "allocated")        \
    X(MSNAP_LAYER_ASYNC, "async")                \
    X(MSNAP_LAYER_MANAGED, "managed")            \
    X(MSNAP_LAYER_PINNED, "pinned")              \
    X(MSNAP_LAYER_VMM_VA, "vmm_va")              \
    X(MSNAP_LAYER_VMM_MAPPED, "vmm_mapped")

typedef enum msnap_layer {
#define MSNAP_X_ENUM(e, s) e,
    MSNAP_LAYERS(MSNAP_X_ENUM)
#undef MSNAP_X_ENUM
    MSNAP_LAYER_COUNT
} msnap_layer;

const char *msnap_layer_name(int layer); /* "?" when out of range */

/* Key spaces of live objects (u64map tags). */
enum msnap_space { MSNAP_SP_MEM = 1, MSNAP_SP_BLOCK, MSNAP_SP_VA,
                   MSNAP_SP_PHYS, MSNAP_SP_MAP };

/* Device slots: 0..MSNAP_MAX_DEVICES-1 are CUDA ordinals; the last slot
 * holds device -1 / out-of-range ordinals and pinned host memory. */
#define MSNAP_ST_NDEV (MSNAP_MAX_DEVICES + 1)
#define MSNAP_ST_HOST MSNAP_MAX_DEVICES
#define MSNAP_ST_UNDO 64           /* frees a free_error can undo */
#define MSNAP_NO_SITE UINT32_MAX

/* The slot of a device ordinal. */
static inline int msnap_st_slot(int device)
{
    return device >= 0 && device < MSNAP_MAX_DEVICES ? device : MSNAP_ST_HOST;
}

/* A running total with its peak. */
typedef struct msnap_level {
    uint64_t cur;
    uint64_t peak;
    uint64_t peak_t;   /* t_ns when the peak was first reached */
    uint64_t peak_ev;  /* after this event (1-based index); 0 = never */
} msnap_level;

/* One live allocation / block / reservation / handle / mapping. */
typedef struct msnap_obj {
    uint64_t addr;     /* 0 for PHYS */
    uint64_t size;
    uint64_t t_ns;     /* when it was made */
    uint64_t aux;      /* VMM handle (vmm_create, vmm_map) */
    uint64_t stream;
    uint32_t stack;
    uint32_t site;     /* index into sites, MSNAP_NO_SITE: none */
    int16_t device;    /* slot */
    uint8_t kind;      /* msnap_action that made it */
    uint8_t space;     /* enum msnap_space */
    uint8_t api;       /* msnap_api of the event that made it (0 for state lines) */
    uint64_t req;      /* the size the program asked for, when the allocator
                          says (PyTorch's blocks: y); 0 otherwise */
} msnap_obj;

/* An allocation site: a stack id in one layer on one device slot. */
typedef struct msnap_site {
    uint32_t stack;
    uint8_t layer;     /* MSNAP_LAYER_RESERVED, _ALLOCATED or _PINNED */
    uint8_t kind;      /* action of its first allocation */
    int16_t device;    /* slot */
    uint64_t live, peak, peak_t;
    uint64_t count;    /* allocations made (restored frees not counted) */
    uint64_t bytes;    /* bytes allocated in total */
    uint64_t live_count; /* objects live at msnap_state_finish */
} msnap_site;

typedef struct msnap_state msnap_state;

/* Called before and after each level change (sign +1 add, -1 remove);
 * a non-zero return from after stops the feed (msnap_state_event -1). */
typedef struct msnap_state_observer {
    void (*before)(void *ctx, const msnap_state *st, const msnap_obj *o, int sign);
    int (*after)(void *ctx, const msnap_state *st, const msnap_obj *o, int sign);
    /* A free of a key not live made pre-window object st->pre[i] (the
     * object was live before this event and is gone after it; no level
     * moves).  Not called for the state section's objects, which
     * msnap_state_finish adds.  A non-zero return stops the feed. */
    int (*pre)(void *ctx, const msnap_state *st, size_t i);
    void *ctx;
} msnap_state_observer;

struct msnap_state {
    msnap_level lv[MSNAP_ST_NDEV][MSNAP_LAYER_COUNT];
    msnap_level all[MSNAP_LAYER_COUNT];   /* the sum over slots, one moment */
    uint64_t cnt_peak[MSNAP_ST_NDEV][MSNAP_LAYER_COUNT]; /* counters lines */
    uint64_t cnt_peak_t[MSNAP_ST_NDEV][MSNAP_LAYER_COUNT];
    int seen[MSNAP_ST_NDEV];     /* a memory event / device line for the slot */
    int allocated_seen;          /* any block event or counters' allocated */
    int counters_seen;

    uint64_t events;             /* events fed (the current event's index) */
    uint64_t t_ns;               /* the current event's time */
    uint64_t unknown_frees;      /* frees of keys not live */
    uint64_t reused;             /* allocations at a key still live */
    uint64_t restored;           /* objects a free_error put back */
    msnap_obj freed;             /* first object the last event removed (size 0: none) */

    /* live set */
    u64map map;                  /* (space, key) -> index into objs */
    msnap_obj *objs;
    size_t nobjs, cap_objs;
    uint32_t *free_slots;
    size_t nfree_slots, cap_free_slots;

    /* undo ring of the last frees */
    struct { msnap_obj o; uint64_t key, serial; uint32_t tid; int valid; } undo[MSNAP_ST_UNDO];
    unsigned undo_n;

    /* sites */
    u64map site_map;             /* key -> index into sites */
    msnap_site *sites;
    size_t nsites, cap_sites;

    /* pre-window objects (unknown frees with a size, unmatched live lines) */
    struct msnap_pre { msnap_obj o; uint64_t key; } *pre;
    size_t npre, cap_pre;
    msnap_obj *state_lines;      /* the last state section */
    size_t nstate_lines, cap_state_lines;
    int in_state, state_seen;
    uint64_t state_t, state_nlive, state_bytes; /* state section: RESERVED bytes */

    msnap_state_observer obs;
    int no_sites;                /* set by the owner: objects get no site and
                                    no site figures move (the recorder's
                                    writer, which needs none) */
};

/* Zeroes *st. */
void msnap_state_init(msnap_state *st);
void msnap_state_free(msnap_state *st);
void msnap_state_observe(msnap_state *st, const msnap_state_observer *o);

/* Applies one event.  0 ok, -1 out of memory or the observer stopped. */
int msnap_state_event(msnap_state *st, const msnap_event *e);
/* Applies any record: events, device lines, counters, state/live lines;
 * others are ignored.  0 ok, -1 as msnap_state_event. */
int msnap_state_record(msnap_state *st, const msnap_record *r);
/* After the last record: pre-window objects from the state section and
 * each site's live_count.  0 ok, -1 out of memory. */
int msnap_state_finish(msnap_state *st);
/* For a second read: drops the live set, levels, site figures and the
 * undo ring, keeps site identities (same indexes) and the pre-window
 * objects, which it puts back as live (no allocation counted).  0 ok, -1
 * out of memory. */
int msnap_state_rewind(msnap_state *st);

/* Peak of a layer on a slot (slot -1: the process), counters included. */
uint64_t msnap_state_peak(const msnap_state *st, int slot, int layer);
/* The level of a layer on a slot (slot -1: the process) with the counters
 * lines folded in: a higher counters value replaces peak and peak_t. */
msnap_level msnap_state_level(const msnap_state *st, int slot, int layer);

/* The live object under (space, key); NULL when none. */
const msnap_obj *msnap_state_find(const msnap_state *st, int space, uint64_t key);

/* The index of o's site (created when new, so a reader can give sites of
 * pre-window objects a figure before a second read); MSNAP_NO_SITE for
 * kinds without sites or when out of memory. */
uint32_t msnap_state_site_for(msnap_state *st, const msnap_obj *o);

/* The site layer of an object kind on a slot (RESERVED, ALLOCATED, PINNED),
 * or -1 for kinds without sites. */
int msnap_state_site_layer(int kind, int slot);
/* Whether an object of kind on slot counts in layer. */
int msnap_state_counts_in(int kind, int slot, int layer);

#ifdef __cplusplus
}
#endif
#endif
