/* The address range a loaded module occupies: from the lowest to the end of
 * the highest of its PT_LOAD segments.  Used with dl_iterate_phdr to ask
 * "is this instruction pointer in that library" without symbols.  And a
 * pointer of a loaded module's dynamic section. */
#ifndef MEMSNAP_MODRANGE_H
#define MEMSNAP_MODRANGE_H
#include <link.h>
#include <stdint.h>

/* Sets [*lo, *hi) to info's PT_LOAD extent; *lo > *hi when it has none. */
static inline void rec_module_extent(const struct dl_phdr_info *info, uintptr_t *lo,
                                     uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < *lo) *lo = a;
        if (a + ph->p_memsz > *hi) *hi = a + ph->p_memsz;
    }
}

/* The address a dynamic section entry's d_ptr names, in a module loaded at
 * base: glibc relocates most in place, but not every loader does. */
static inline uintptr_t rec_dyn_ptr(ElfW(Addr) p, ElfW(Addr) base)
{
    return (uintptr_t)(p < base ? p + base : p);
}
#endif
