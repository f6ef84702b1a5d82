/* The stack table (see stacktab.h for the invariants).
 *
 * Insert: key the frames (stacktab.h's fold, which a Python frame walk
 * does as it goes), probe linearly from the home slot.
 * An empty slot is claimed with one CAS on its hash; the claiming thread then
 * takes the next id and an arena range with fetch_add, copies the frames,
 * stores the check and publishes the id with a release store.  A thread
 * that finds the same hash waits for the id (the filler is microseconds
 * away; the wait is bounded, since after a fork() the filler may be a
 * thread that no longer exists), then compares the checks, so two stacks
 * with the same hash are told apart.  A found stack's frames are never
 * read: on a training step's hot path they were cold, four or five cache
 * lines an event (issue 28), where the slot is one.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "stacktab.h"
#include "mapmem.h"

int stacktab_init(stacktab *t, uint64_t max_stacks, uint64_t arena_frames)
{
    memset(t, 0, sizeof *t);
    uint64_t nslots = 1;
    while (nslots < max_stacks * 2)
        nslots <<= 1;
    t->slots = rec_map_zeroed(nslots * sizeof *t->slots);
    t->entries = rec_map_zeroed((max_stacks + 1) * sizeof *t->entries);
    t->arena = rec_map_zeroed(arena_frames * sizeof *t->arena);
    /* the sizes first: stacktab_destroy unmaps by them */
    t->mask = nslots - 1;
    t->max_stacks = max_stacks;
    t->arena_cap = arena_frames;
    if (!t->slots || !t->entries || !t->arena) {
        stacktab_destroy(t);
        return -1;
    }
    atomic_store(&t->next_id, 1);
    return 0;
}

void stacktab_destroy(stacktab *t)
{
    if (t->slots)
        munmap(t->slots, (t->mask + 1) * sizeof *t->slots);
    if (t->entries)
        munmap(t->entries, (t->max_stacks + 1) * sizeof *t->entries);
    if (t->arena)
        munmap(t->arena, t->arena_cap * sizeof *t->arena);
    memset(t, 0, sizeof *t);
}

__attribute__((hot)) uint32_t stacktab_intern(stacktab *t, const uint64_t *ips, int depth)
{
    return stacktab_intern_keyed(t, ips, depth, stacktab_key_of(ips, depth));
}

__attribute__((hot)) uint32_t stacktab_intern_keyed(stacktab *t, const uint64_t *ips, int depth, stacktab_key key)
{
    const uint64_t h = key.hash;
    const uint32_t check = (uint32_t)key.check;
    for (uint64_t probe = 0, i = h & t->mask; probe <= t->mask;
         probe++, i = (i + 1) & t->mask) {
        stacktab_slot *s = &t->slots[i];
        uint64_t cur = atomic_load_explicit(&s->hash, memory_order_acquire);
        if (cur == 0) {
            uint64_t zero = 0;
            if (atomic_compare_exchange_strong(&s->hash, &zero, h)) {
                s->check = check;
                uint32_t id = atomic_fetch_add(&t->next_id, 1);
                uint64_t off = atomic_fetch_add(&t->arena_used, (uint64_t)depth);
                if (id > t->max_stacks || off + (uint64_t)depth > t->arena_cap) {
                    atomic_store_explicit(&s->id, STACKTAB_OVERFLOW, memory_order_release);
                    atomic_fetch_add(&t->dropped, 1);
                    return 0;
                }
                memcpy(&t->arena[off], ips, (size_t)depth * sizeof(uint64_t));
                t->entries[id].off = off;
                t->entries[id].depth = (uint32_t)depth;
                atomic_store_explicit(&s->id, id, memory_order_release);
                return id;
            }
            cur = zero;   /* the hash another thread just claimed */
        }
        if (cur != h)
            continue;
        uint32_t id;
        int waits = 0;
        while ((id = atomic_load_explicit(&s->id, memory_order_acquire)) == 0) {
            /* The filler is microseconds away -- unless it was a thread that
             * vanished in a fork(): then give up rather than spin forever. */
            if (++waits > 100000) {
                atomic_fetch_add(&t->dropped, 1);
                return 0;
            }
            sched_yield();
        }
        if (s->check != check)
            continue;     /* the same hash, another stack: probe on */
        if (id == STACKTAB_OVERFLOW) {
            /* this stack could not be stored: count it as dropped */
            atomic_fetch_add(&t->dropped, 1);
            return 0;
        }
        return id;
    }
    atomic_fetch_add(&t->dropped, 1);
    return 0;
}

uint32_t stacktab_count(stacktab *t)
{
    uint32_t n = atomic_load(&t->next_id) - 1;
    return n > t->max_stacks ? (uint32_t)t->max_stacks : n;
}

int stacktab_get(stacktab *t, uint32_t id, const uint64_t **ips)
{
    if (id == 0 || id > stacktab_count(t))
        return -1;
    *ips = &t->arena[t->entries[id].off];
    return (int)t->entries[id].depth;
}

uint64_t stacktab_dropped(stacktab *t) { return atomic_load(&t->dropped); }
