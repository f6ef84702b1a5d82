/* vmap: open-addressing hash map (tag, 64-bit key) -> 64-bit value for the
 * renderer's live set and id tables.  Linear probing in a power-of-two
 * table at most half full; backward-shift deletion (no tombstones), so a map
 * that sees millions of alloc/free pairs stays as small as its live set.
 * Header-only.  (The CLI has the same structure in cli/u64map.h; the
 * renderer is a library of its own and does not reach into cli/.)
 */
#ifndef MEMSNAP_VIZ_VMAP_H
#define MEMSNAP_VIZ_VMAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct vmap_slot {
    uint64_t key, value;
    uint32_t tag, used;
} vmap_slot;

typedef struct vmap {
    vmap_slot *slots;
    size_t cap, n; /* cap: power of two or 0; n * 2 <= cap */
} vmap;

static inline size_t vmap_home_(uint64_t key, uint32_t tag, size_t cap)
{
    uint64_t x = key ^ ((uint64_t)tag * 0x9e3779b97f4a7c15ULL);
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (size_t)x & (cap - 1);
}

/* Pointer to the value of (tag, key), NULL when absent; valid until the
 * next put or del. */
static inline uint64_t *vmap_get(const vmap *m, uint32_t tag, uint64_t key)
{
    if (!m->cap)
        return NULL;
    size_t i = vmap_home_(key, tag, m->cap);
    while (m->slots[i].used) {
        if (m->slots[i].key == key && m->slots[i].tag == tag)
            return &m->slots[i].value;
        i = (i + 1) & (m->cap - 1);
    }
    return NULL;
}

/* Sets (tag, key) -> value.  0 ok, -1 out of memory (map unchanged). */
static inline int vmap_put(vmap *m, uint32_t tag, uint64_t key, uint64_t value)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        vmap_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].used)
                continue;
            size_t j = vmap_home_(m->slots[i].key, m->slots[i].tag, ncap);
            while (ns[j].used)
                j = (j + 1) & (ncap - 1);
            ns[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = ns;
        m->cap = ncap;
    }
    size_t i = vmap_home_(key, tag, m->cap);
    while (m->slots[i].used) {
        if (m->slots[i].key == key && m->slots[i].tag == tag) {
            m->slots[i].value = value;
            return 0;
        }
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (vmap_slot){key, value, tag, 1};
    m->n++;
    return 0;
}

/* Removes (tag, key); 1 and *value when it was there, 0 when not. */
static inline int vmap_del(vmap *m, uint32_t tag, uint64_t key, uint64_t *value)
{
    if (!m->cap)
        return 0;
    size_t mask = m->cap - 1, i = vmap_home_(key, tag, m->cap);
    while (m->slots[i].used && !(m->slots[i].key == key && m->slots[i].tag == tag))
        i = (i + 1) & mask;
    if (!m->slots[i].used)
        return 0;
    if (value)
        *value = m->slots[i].value;
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].used)
            break;
        size_t home = vmap_home_(m->slots[j].key, m->slots[j].tag, m->cap);
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].used = 0;
    m->n--;
    return 1;
}

static inline void vmap_clear(vmap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

#endif
