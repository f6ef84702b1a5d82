/* Output path patterns (see pathpat.c for the escapes). */
#ifndef MEMSNAP_PATHPAT_H
#define MEMSNAP_PATHPAT_H
#include <stddef.h>
#include <stdint.h>
/* Expands pat into dst (cap bytes).  0, or -1 when the result does not fit. */
int pathpat_expand(const char *pat, long pid, uint64_t n, uint64_t t_s, char *dst, size_t cap);
#endif
