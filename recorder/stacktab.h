/* The stack table: native stacks stored once, referred to by a 32-bit id.
 *
 * Lock-free and bounded: a fixed array of hash slots (twice the capacity,
 * linear probing), an entry per id (offset and depth into the arena) and a
 * frame arena, all mapped once at init (MAP_NORESERVE: untouched pages cost
 * nothing).  Any number of threads may intern at once; nothing is freed.
 *
 * Invariants:
 *   slot.hash != 0      the slot is claimed (never released);
 *   slot.id != 0        entries[id] is complete and visible (stored with
 *                       release, read with acquire); STACKTAB_OVERFLOW marks a
 *                       slot whose stack could not be stored;
 *   ids                 handed out from 1 upward, never reused;
 *   full table/arena    intern returns 0 ("no stack") and counts the event in
 *                       dropped.
 */
#ifndef MEMSNAP_STACKTAB_H
#define MEMSNAP_STACKTAB_H

#include <stdatomic.h>
#include <stdint.h>

#define STACKTAB_OVERFLOW UINT32_MAX

typedef struct stacktab_slot {
    _Atomic uint64_t hash;      /* 0 = free */
    _Atomic uint32_t id;        /* 0 = being filled */
    uint32_t pad;
} stacktab_slot;

typedef struct stacktab_entry {
    uint64_t off;               /* into arena */
    uint32_t depth;
    uint32_t pad;
} stacktab_entry;

typedef struct stacktab {
    stacktab_slot *slots;       /* power of two >= 2 * max_stacks */
    uint64_t mask;
    stacktab_entry *entries;    /* indexed by id, 1..max_stacks */
    uint64_t *arena;
    uint64_t arena_cap;         /* frames */
    uint64_t max_stacks;
    _Atomic uint64_t arena_used;
    _Atomic uint32_t next_id;
    _Atomic uint64_t dropped;
} stacktab;

/* Maps the table for max_stacks stacks and arena_frames frames in all.
 * 0 on success, -1 (errno set) when the memory cannot be mapped. */
int stacktab_init(stacktab *t, uint64_t max_stacks, uint64_t arena_frames);
/* Unmaps everything (tests only: the recorder never frees its table). */
void stacktab_destroy(stacktab *t);
/* The id of the stack ips[0..depth) (innermost first), inserting it if new;
 * 0 when it cannot be stored.  depth > 0. */
uint32_t stacktab_intern(stacktab *t, const uint64_t *ips, int depth);

/* A stack's hash, frame by frame, so that a walk can fold it in as it goes:
 * h = STACKTAB_HASH_SEED, h = stacktab_hash_step(h, ip) for each frame
 * innermost first, then stacktab_hash_end(h, depth) (never 0). */
#define STACKTAB_HASH_SEED 0x9e3779b97f4a7c15ull
static inline uint64_t stacktab_hash_step(uint64_t h, uint64_t ip)
{
    h = (h ^ ip) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}
static inline uint64_t stacktab_hash_end(uint64_t h, int depth)
{
    h = (h ^ (uint64_t)(uint32_t)depth) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return h ? h : 1;
}
/* stacktab_intern with the stack's hash already made as above. */
uint32_t stacktab_intern_hashed(stacktab *t, const uint64_t *ips, int depth, uint64_t hash);
/* Highest id handed out so far. */
uint32_t stacktab_count(stacktab *t);
/* Depth of stack id and *ips, or -1 for an unknown id.  Complete for every id
 * an event refers to (the interning thread finished before it emitted). */
int stacktab_get(stacktab *t, uint32_t id, const uint64_t **ips);
/* Interns that could not be stored (table or arena full). */
uint64_t stacktab_dropped(stacktab *t);

#endif
