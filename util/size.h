/* Sizes typed by people: the one size parser of memsnap, used by every
 * option and setting that takes a size (render --cap, replay and predict
 * --device-mem, memsnap run --sim-device and MEMSNAP_SIM_DEVICE_MEM,
 * MEMSNAP_RING_EVENTS & co, MEMSNAP_ALLOC_CONF's device_limit,
 * memsnap-decode's sizes), so "80G" means one thing everywhere.
 *
 * Header-only and always inlined: the simulated device and the allocator,
 * which link nothing of ours, use it too, and it leaves no function of its
 * own in them (the allocator names every function of its ms_* or
 * memsnap_*, which is how a site's label knows its frames without debug
 * information: allocator/internal.h, tests/allocator/symbols.sh). */
#ifndef MEMSNAP_UTIL_SIZE_H
#define MEMSNAP_UTIL_SIZE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* a + b, at most 2^64 - 1: a sum of sizes a hostile file gives cannot wrap
 * to a small number (a level past 2^64 - 1 bytes reads 16 EiB). */
static inline __attribute__((always_inline)) uint64_t msnap_add_sat(uint64_t a, uint64_t b)
{
    return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* Parses s, a size, into *out in bytes: a whole number, or a decimal one
 * before a unit; an optional binary unit K, M, G or T in either case, then
 * an optional "i", then an optional "B" or "b": "80G", "512M", "1.5T",
 * "64KiB", "8gb", "4096B", "1073741824".  Binary units throughout (GPU
 * capacities and allocator granularities are powers of two).  The whole
 * part is read as an integer, so every byte count up to 2^64 - 1 is
 * exact; a fraction of a unit is rounded down to a whole byte, and a
 * fraction of a byte ("1.5") is refused.  0 ok; -1 for anything else
 * (empty, a sign, spaces, another unit, past 2^64 - 1), *out unchanged.
 * Ranges are the caller's. */
static inline __attribute__((always_inline)) int msnap_size_parse(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    double frac = 0;
    if (*end == '.') {
        const char *f = ++end;
        for (double scale = 0.1; *end >= '0' && *end <= '9'; end++, scale /= 10)
            frac += (*end - '0') * scale;
        if (end == f)
            return -1;
    }
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    }
    if (shift) {
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || (frac > 0 && !shift) || v > (UINT64_MAX >> shift))
        return -1;
    uint64_t bytes = (uint64_t)v << shift;
    uint64_t part = (uint64_t)(frac * (double)(1ull << shift));
    if (bytes > UINT64_MAX - part)
        return -1;
    *out = bytes + part;
    return 0;
}

#endif
