/* libmemsnap_stacks.so: the recorder's native-stack support (stacks.h says
 * why it is a library of its own).  It links libunwind and the symbolizer
 * (elfutils); libmemsnap.so loads it with dlopen(RTLD_LOCAL), so those
 * libraries serve this file alone and interpose on nothing in the program.
 * One exported function returns the table of what the recorder calls. */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "stacks.h"

static void per_thread_caches(void)
{
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

__attribute__((visibility("default"))) const memsnap_stacks_api *memsnap_stacks_table(void)
{
    static const memsnap_stacks_api api = {
        .size = sizeof(memsnap_stacks_api),
        .version = MEMSNAP_STACKS_API_VERSION,
        .backtrace = unw_backtrace,
        .per_thread_caches = per_thread_caches,
        .sym_new = msnap_symbolizer_new,
        .sym_add_self = msnap_symbolizer_add_self,
        .sym_resolve_frame = msnap_symbolizer_resolve_frame,
        .sym_free = msnap_symbolizer_free,
    };
    return &api;
}
