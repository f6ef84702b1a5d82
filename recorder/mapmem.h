/* Zeroed anonymous memory for the recorder's fixed tables, mapped once at
 * start-up.  MAP_NORESERVE: pages never touched cost nothing. */
#ifndef MEMSNAP_MAPMEM_H
#define MEMSNAP_MAPMEM_H
#include <stddef.h>
#include <sys/mman.h>

/* bytes of zeroed memory, or NULL. */
static inline void *rec_map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
#endif
