/* FNV-1a: the one string and byte hash of memsnap (the recorder's string
 * table, the symbolizer's cache, the labels' frame and site keys, the
 * importers' and exporters' memo tables, the what-if engine's stack keys,
 * the timeline's palette for user categories).
 *
 * FNV-1a is short, has no state beyond the running hash, and spreads
 * short strings (function names, file names, category names) well enough
 * for the open-addressing tables (u64map.h) that use it; nothing here
 * needs a keyed hash, as no table is fed by an adversary who sees its
 * layout.  A hash continues from h, so several pieces hash as one:
 * msnap_fnv1a_str(msnap_fnv1a_str(MSNAP_FNV_BASIS, a), b).
 *
 * Header-only (static inline): the recorder's hot path interns strings
 * with it and must not call out of its own library. */
#ifndef MEMSNAP_UTIL_HASH_H
#define MEMSNAP_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define MSNAP_FNV_BASIS 0xcbf29ce484222325ull /* 64-bit offset basis */
#define MSNAP_FNV_PRIME 0x100000001b3ull      /* 64-bit prime */
#define MSNAP_FNV32_BASIS 2166136261u         /* 32-bit offset basis */
#define MSNAP_FNV32_PRIME 16777619u           /* 32-bit prime */

/* The hash of n bytes at p, continuing from h (MSNAP_FNV_BASIS to start). */
static inline uint64_t msnap_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * MSNAP_FNV_PRIME;
    return h;
}

/* The hash of a NUL-terminated string (without its NUL), continuing from h. */
static inline uint64_t msnap_fnv1a_str(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * MSNAP_FNV_PRIME;
    return h;
}

/* The 32-bit FNV-1a of a string, from the 32-bit basis (where a small
 * number is picked from a name, e.g. a colour from a palette). */
static inline uint32_t msnap_fnv1a32_str(const char *s)
{
    uint32_t h = MSNAP_FNV32_BASIS;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * MSNAP_FNV32_PRIME;
    return h;
}

#endif
