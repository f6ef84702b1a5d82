/* Sizes and times for people: the one formatter every command prints with
 * (summary, render, compare), so one figure reads the same everywhere.
 * Each writes into buf (cap bytes, 32 is always enough) and returns buf. */
#ifndef MEMSNAP_UTIL_HUMAN_H
#define MEMSNAP_UTIL_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* Bytes with a 1024 base and two decimals: "512 B", "1.50 KiB", "2.00 GiB". */
const char *msnap_size_text(uint64_t bytes, char *buf, size_t cap);

/* msnap_size_text, or with exact set the byte count alone ("1073741824"):
 * what a command's --bytes option prints. */
const char *msnap_size_or_bytes(uint64_t bytes, int exact, char *buf, size_t cap);
/* Bytes as short as exact enough for an axis: "2 GiB", "1.5 GiB", "0 B". */
const char *msnap_size_text_short(uint64_t bytes, char *buf, size_t cap);
/* A duration in ns: "850 ns", "12.500 us", "3.250 ms", "12.345 s",
 * "2.50 min", "1.25 h". */
const char *msnap_time_text(uint64_t ns, char *buf, size_t cap);

/* The other way: a duration typed by a person, a non-negative number with
 * an optional unit ns, us, ms, s, m or min, h (bare = seconds), into ns
 * (rounded).  0 ok, -1 when it is not one or is past 2^64 ns. */
int msnap_time_parse(const char *s, uint64_t *ns);

/* The other way for sizes: msnap_size_parse, util/size.h. */

#endif
