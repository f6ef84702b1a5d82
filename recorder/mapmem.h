/* Zeroed anonymous memory for the recorder's fixed tables, mapped once at
 * start-up.  MAP_NORESERVE: pages never touched cost nothing. */
#ifndef MEMSNAP_MAPMEM_H
#define MEMSNAP_MAPMEM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* bytes of zeroed memory, or NULL. */
static inline void *rec_map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

#define REC_HUGE (2u << 20)

/* The same for a table every event writes at a place of its own and that
 * is touched all over anyway (the queue's slots): on 2 MiB pages where the
 * kernel gives them (transparent huge pages, "madvise" or "always"), so
 * that one TLB entry covers what 512 did; the program's work between two
 * events evicts the TLB (docs/recorder.md, *What an event touches*).  Not
 * for a hashed table a small program touches in a few places (the stack
 * table's slots: 8 MiB held where a few hundred KiB were).  The mapping is
 * exactly [p, p + bytes), 2 MiB-aligned: munmap(p, bytes) frees it. */
static inline void *rec_map_hot(size_t bytes)
{
    if (bytes < REC_HUGE)
        return rec_map_zeroed(bytes);
    bytes = (bytes + 4095) & ~(size_t)4095;   /* the tail's munmap needs a page boundary */
    char *p = mmap(NULL, bytes + REC_HUGE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + REC_HUGE - 1) & ~(uintptr_t)(REC_HUGE - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    if (a + bytes < p + bytes + REC_HUGE)
        munmap(a + bytes, (size_t)(p + bytes + REC_HUGE - (a + bytes)));
#ifdef MADV_HUGEPAGE
    madvise(a, bytes, MADV_HUGEPAGE);   /* refused ("never"): 4 KiB pages, as before */
#endif
    return a;
}
#endif
