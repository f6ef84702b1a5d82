/* Internals shared by the format library's files (not installed, not a
 * public header).
 *
 * The writer side (write.c) and the reader side (read.c) share two things:
 * the name tables of actions and APIs, looked up from a (pointer, length)
 * span so the reader's fast event parser never copies a name, and the rule
 * for 64-bit integers: values below 2^53 are JSON numbers, values at or
 * above it are "0x..." hex strings, because JSON readers that parse numbers
 * as doubles (cJSON, JavaScript) lose precision above 2^53. */
#ifndef MSNAP_FORMAT_INTERNAL_H
#define MSNAP_FORMAT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "memsnap/format.h"

/* Integers at or above this are written as hex strings. */
#define MSNAP_JSON_EXACT_LIMIT (UINT64_C(1) << 53)

/* Longest line the reader accepts, and longest event line the writer makes. */
#define MSNAP_MAX_LINE ((size_t)64 << 20)
#define MSNAP_EVENT_LINE_MAX MSNAP_FMT_EVENT_MAX

/* Action / API index for a name given as a span; -1 when unknown. */
int msnap__action_from_span(const char *s, size_t n);
int msnap__api_from_span(const char *s, size_t n);

#endif
