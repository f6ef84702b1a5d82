/* Growing arrays: the one way memsnap grows an array that gains one
 * element at a time (a table of sites, the spans of a layout, a list of
 * rules), so the doubling, the overflow check and the rule "on failure
 * nothing changes" are written once.
 *
 *   if (msnap_grow((void **)&v, &cap, n, sizeof *v))
 *       return -1;               // out of memory: v, cap as they were
 *   v[n++] = x;
 *
 * Header-only (static inline). */
#ifndef MEMSNAP_UTIL_GROW_H
#define MEMSNAP_UTIL_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Grows *arr (elements of esz bytes, room for *cap) so that index n fits:
 * the room doubles, from 64 elements.  0 ok (nothing done when n < *cap),
 * -1 out of memory or past SIZE_MAX bytes (*arr and *cap unchanged). */
static inline int msnap_grow(void **arr, size_t *cap, size_t n, size_t esz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap : 32;
    do {
        if (ncap > SIZE_MAX / 2)
            return -1;
        ncap *= 2;
    } while (ncap <= n);
    if (esz && ncap > SIZE_MAX / esz)
        return -1;
    void *na = realloc(*arr, ncap * esz);
    if (!na)
        return -1;
    *arr = na;
    *cap = ncap;
    return 0;
}

#endif
