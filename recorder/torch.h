/* PyTorch's allocated layer (torch.c): the two calls the rest of the
 * recorder makes.  The hooks of driver allocations call torch_on_driver_alloc
 * after the driver returns; it costs one atomic load once PyTorch is attached
 * or known absent. */
#ifndef MEMSNAP_RECORDER_TORCH_H
#define MEMSNAP_RECORDER_TORCH_H

#include <stdatomic.h>
#include <stddef.h>

extern _Atomic int g_torch_state;   /* 0 while still looking for PyTorch */

/* Looks for PyTorch and attaches the plugin (torch.c). */
void torch_on_driver_alloc_slow(void);

/* In-process recording (inproc.c): finds PyTorch now, loads the plugin
 * and, with attach, attaches it.  0 ok, 1 not yet (PyTorch's allocator is
 * not initialized), -1 no PyTorch, -2 no plugin, -3 another backend, -4
 * the attach failed; a line in msg for -1..-4 (torch.c). */
int torch_inproc(int attach, char *msg, size_t cap);

/* Called by the hooks of cuMemAlloc_v2, cuMemAddressReserve and cuMemCreate
 * on the allocating thread, after the driver call. */
static inline void torch_on_driver_alloc(void)
{
    if (atomic_load_explicit(&g_torch_state, memory_order_relaxed) == 0)
        torch_on_driver_alloc_slow();
}

#endif
