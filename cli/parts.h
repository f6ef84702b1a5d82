/* Where memsnap finds the parts it loads at run time: the recorder
 * (libmemsnap.so), the folder of the simulated libcuda.so.1, and the
 * allocator library that replay dlopens.
 *
 * Each is looked up, in order: in the environment variable that names it
 * (MEMSNAP_LIB, MEMSNAP_SIMDEV_DIR, MEMSNAP_ALLOC_LIB); relative to the
 * memsnap binary in the installed layout (bin/ -> lib/memsnap/libmemsnap.so,
 * lib/memsnap/simdev/libcuda.so.1, lib/libmemsnap_alloc.so.N), so that an
 * installed tree works from any prefix it is copied to; relative to the
 * binary in the build tree (bin/ -> lib/libmemsnap.so, simdev/,
 * lib/libmemsnap_alloc.so). */
#ifndef MEMSNAP_CLI_PARTS_H
#define MEMSNAP_CLI_PARTS_H
#include <stddef.h>

typedef enum memsnap_part {
    MEMSNAP_PART_RECORDER,    /* a file: libmemsnap.so */
    MEMSNAP_PART_SIMDEV_DIR,  /* a folder holding libcuda.so.1 */
    MEMSNAP_PART_ALLOC,       /* a file: libmemsnap_alloc.so */
} memsnap_part;

/* Finds part; writes its path into out (cap bytes).  Returns 0 when it
 * exists, -1 when not: out then holds the first place looked at (for the
 * message).  The environment variable wins even when its path is wrong. */
int memsnap_part_find(memsnap_part part, char *out, size_t cap);

/* The environment variable that overrides part. */
const char *memsnap_part_env(memsnap_part part);

#endif
