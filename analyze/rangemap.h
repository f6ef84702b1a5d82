/* An ordered map of address ranges: the live ranges a reader keeps by
 * address (the breakdown's segments and mappings that allocator blocks lie
 * in), with insert, remove and "the range that starts at or below this
 * address" each in O(log n) expected.
 *
 * It replaces a sorted array with a memmove per insert and remove, which
 * made a driver-level recording with a big live set quadratic (100k live
 * cudaMalloc allocations: every alloc and free moved 2.4 MB;
 * docs/benchmarks.md, "Summary of a driver-level recording").
 *
 * A treap: nodes in one array (indexes, not pointers, so growing it is one
 * realloc), ordered by (addr, size, newest first); priorities from a
 * xorshift sequence per map, so the shape and every answer are the same on
 * every run.  Ranges may overlap or repeat; the map does not look.
 *
 * Zero-initialised is an empty map.  Not thread-safe; maps are
 * independent.
 */
#ifndef MEMSNAP_ANALYZE_RANGEMAP_H
#define MEMSNAP_ANALYZE_RANGEMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct rm_node {
    uint64_t addr, size;
    uint64_t val;              /* the caller's */
    uint64_t seq;              /* insertion number: newest first among equals */
    uint32_t left, right;      /* node index + 1; 0 none */
    uint32_t prio;
} rm_node;

typedef struct rangemap {
    rm_node *nodes;
    size_t cap, used;          /* slots allocated / ever used */
    uint32_t root;             /* index + 1; 0 empty */
    uint32_t free_head;        /* freed slots, chained through .left */
    uint32_t rng;              /* xorshift state (0: not seeded yet) */
    uint64_t seq;
    size_t count;              /* ranges in the map */
} rangemap;

/* Adds [addr, addr+size) with the caller's value.  0 ok, -1 out of memory
 * (the map unchanged). */
int rangemap_insert(rangemap *m, uint64_t addr, uint64_t size, uint64_t val);

/* Removes the newest range that starts at addr with this size.  1 when one
 * was removed, 0 when there is none. */
int rangemap_remove(rangemap *m, uint64_t addr, uint64_t size);

/* The range with the greatest start at or below addr (of those, the
 * largest, then the oldest); NULL when none starts there or below.  The
 * pointer is valid until the next insert or remove. */
const rm_node *rangemap_floor(const rangemap *m, uint64_t addr);

/* The range that starts at addr exactly (the largest, then the oldest),
 * NULL when none. */
const rm_node *rangemap_at(const rangemap *m, uint64_t addr);

/* Frees the nodes; the map is empty again. */
void rangemap_free(rangemap *m);

#endif
