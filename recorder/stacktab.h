/* The stack table: native stacks stored once, referred to by a 32-bit id.
 *
 * Lock-free and bounded: a fixed array of hash slots (twice the capacity,
 * linear probing), an entry per id (offset and depth into the arena) and a
 * frame arena, all mapped once at init (MAP_NORESERVE: untouched pages cost
 * nothing).  Any number of threads may intern at once; nothing is freed.
 *
 * Invariants:
 *   slot.hash != 0      the slot is claimed (never released);
 *   slot.id != 0        entries[id] and slot.check are complete and visible
 *                       (stored with release, read with acquire);
 *                       STACKTAB_OVERFLOW marks a slot whose stack could not
 *                       be stored;
 *   slot.check          a second hash of the frames, 32 bits, made
 *                       independently of slot.hash: a stack is found when
 *                       both match, without reading its stored frames (two
 *                       stacks are told apart by 96 bits of hash: at a
 *                       million distinct stacks, a wrong match is about one
 *                       chance in 10^17);
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
    uint32_t check;             /* the frames' second hash */
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

/* A stack's key, frame by frame, so that a walk can fold it in as it goes:
 * k = STACKTAB_KEY_START, stacktab_key_step(&k, ip) for each frame
 * innermost first, then stacktab_key_end(&k, depth).  Its hash is never 0
 * once ended; a key whose hash is 0 is "not made". */
typedef struct stacktab_key {
    uint64_t hash;
    uint64_t check;             /* ended: 32 bits */
} stacktab_key;
#define STACKTAB_HASH_SEED 0x9e3779b97f4a7c15ull
#define STACKTAB_CHECK_SEED 0x2545f4914f6cdd1dull
#define STACKTAB_KEY_START ((stacktab_key){STACKTAB_HASH_SEED, STACKTAB_CHECK_SEED})
static inline uint64_t stacktab_hash_step(uint64_t h, uint64_t ip)
{
    h = (h ^ ip) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}
/* The check's step: another multiplier on a rotated sum, so that it does
 * not follow the hash (it is off the walk's critical path, the frame
 * chain). */
static inline uint64_t stacktab_check_step(uint64_t c, uint64_t ip)
{
    c = (c + ip) * 0x9fb21c651e98df25ull;
    return (c << 23) | (c >> 41);
}
static inline void stacktab_key_step(stacktab_key *k, uint64_t ip)
{
    k->hash = stacktab_hash_step(k->hash, ip);
    k->check = stacktab_check_step(k->check, ip);
}
static inline uint64_t stacktab_hash_end(uint64_t h, int depth)
{
    h = (h ^ (uint64_t)(uint32_t)depth) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return h ? h : 1;
}
static inline uint64_t stacktab_check_end(uint64_t c, int depth)
{
    c = (c ^ (uint64_t)(uint32_t)depth << 17) * 0xd6e8feb86659fd93ull;
    return (c ^ (c >> 29)) >> 32;
}
static inline void stacktab_key_end(stacktab_key *k, int depth)
{
    k->hash = stacktab_hash_end(k->hash, depth);
    k->check = stacktab_check_end(k->check, depth);
}
/* The key of the whole stack ips[0..depth) at once. */
static inline stacktab_key stacktab_key_of(const uint64_t *ips, int depth)
{
    stacktab_key k = STACKTAB_KEY_START;
    for (int i = 0; i < depth; i++)
        stacktab_key_step(&k, ips[i]);
    stacktab_key_end(&k, depth);
    return k;
}
/* stacktab_intern with the stack's key already made as above. */
uint32_t stacktab_intern_keyed(stacktab *t, const uint64_t *ips, int depth, stacktab_key key);
/* Highest id handed out so far. */
uint32_t stacktab_count(stacktab *t);
/* Depth of stack id and *ips, or -1 for an unknown id.  Complete for every id
 * an event refers to (the interning thread finished before it emitted). */
int stacktab_get(stacktab *t, uint32_t id, const uint64_t **ips);
/* Interns that could not be stored (table or arena full). */
uint64_t stacktab_dropped(stacktab *t);

#endif
