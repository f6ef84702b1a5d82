/* u64map: a small hash map from (tag, 64-bit key) to a 64-bit value, for the
 * per-allocation live state and id tables (stacks, strings, syms) of the
 * recorder's writer, the CLI, the renderer and the interop tools.
 *
 * Open addressing with linear probing in a power-of-two table kept at most
 * half full; deletion uses backward shifting (no tombstones), so a map that
 * sees millions of alloc/free pairs stays as small as its live set.  The tag
 * keeps separate key spaces apart in one map (e.g. device pointers and VMM
 * handles).  Header-only: every function is static inline.
 */
#ifndef MEMSNAP_UTIL_U64MAP_H
#define MEMSNAP_UTIL_U64MAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct u64map_slot {
    uint64_t key;
    uint64_t value;
    uint32_t tag;
    uint32_t used;
} u64map_slot;

typedef struct u64map {
    u64map_slot *slots;
    size_t cap; /* power of two, 0 before the first insert */
    size_t n;   /* used slots; n * 2 <= cap */
} u64map;

/* Slot index for (tag, key) in a table of cap slots. */
static inline size_t u64map_home_(uint64_t key, uint32_t tag, size_t cap)
{
    uint64_t x = key ^ ((uint64_t)tag * 0x9e3779b97f4a7c15ULL);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (size_t)x & (cap - 1);
}

/* Returns a pointer to the value stored for (tag, key), NULL when absent.
 * The pointer is valid until the next insert or delete. */
static inline uint64_t *u64map_get(const u64map *m, uint32_t tag, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t i = u64map_home_(key, tag, m->cap);
    while (m->slots[i].used) {
        if (m->slots[i].key == key && m->slots[i].tag == tag)
            return &m->slots[i].value;
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

/* Sets (tag, key) -> value, replacing an existing value.  0 ok, -1 out of
 * memory (the map is unchanged). */
static inline int u64map_put(u64map *m, uint32_t tag, uint64_t key,
                             uint64_t value)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        u64map_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].used)
                continue;
            size_t j = u64map_home_(m->slots[i].key, m->slots[i].tag, ncap);
            while (ns[j].used)
                j = (j + 1) & (ncap - 1);
            ns[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = ns;
        m->cap = ncap;
    }
    size_t i = u64map_home_(key, tag, m->cap);
    while (m->slots[i].used) {
        if (m->slots[i].key == key && m->slots[i].tag == tag) {
            m->slots[i].value = value;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (u64map_slot){key, value, tag, 1};
    m->n++;
    return 0;
}

/* Removes (tag, key).  Returns 1 and stores the old value in *value (when
 * not NULL) if it was there, 0 if it was not. */
static inline int u64map_del(u64map *m, uint32_t tag, uint64_t key,
                             uint64_t *value)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1;
    size_t i = u64map_home_(key, tag, m->cap);
    while (m->slots[i].used &&
           !(m->slots[i].key == key && m->slots[i].tag == tag))
        i = (i + 1) & mask;
    if (!m->slots[i].used)
        return 0;
    if (value)
        *value = m->slots[i].value;
    /* Backward shift: pull later members of the probe run into the hole
     * when their home slot is at or before it (cyclically). */
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].used)
            break;
        size_t home = u64map_home_(m->slots[j].key, m->slots[j].tag, m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].used = 0;
    m->n--;
    return 1;
}

/* Frees the table; the map is empty and reusable afterwards. */
static inline void u64map_free(u64map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

#endif
