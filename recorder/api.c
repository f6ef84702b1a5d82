/* The recorder's public C API (include/memsnap/memsnap.h).  Each function is
 * a no-op returning MEMSNAP_ERR_OFF when recording is off, and otherwise
 * starts the recorder if needed (so memsnap_annotate before the first CUDA
 * allocation still lands in the file). */
#define _GNU_SOURCE
#include <string.h>

#include "memsnap/memsnap.h"
#include "recorder.h"
#include "pyframes.h"

MSNAP_EXPORT int memsnap_dump(const char *reason)
{
    if (!core_recording())
        return MEMSNAP_ERR_OFF;
    return writer_dump_sync(reason && *reason ? reason : "api") == 0 ? MEMSNAP_OK
                                                                     : MEMSNAP_ERR_IO;
}

MSNAP_EXPORT int memsnap_annotate(const char *message)
{
    if (!core_recording())
        return MEMSNAP_ERR_OFF;
    t_in_hook++;
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.action = MSNAP_A_NVTX_MARK;
    e.api = MSNAP_API_USER;
    e.device = -1;
    e.aux = core_intern(message ? message : "");
    core_emit(&e, 0);
    t_in_hook--;
    return MEMSNAP_OK;
}

MSNAP_EXPORT int memsnap_totals_get(int device, memsnap_totals *out)
{
    if (!out)
        return MEMSNAP_ERR_OFF;
    memset(out, 0, sizeof *out);
    if (!core_recording())
        return MEMSNAP_ERR_OFF;
    writer_sync(atomic_load(&g_queue_head.v));
    uint64_t v[6];
    if (writer_totals(device, v) != 0)
        return MEMSNAP_ERR_OFF;
    out->reserved = v[0];
    out->allocated = v[1];
    out->async = v[2];
    out->managed = v[3];
    out->vmm_mapped = v[4];
    out->events = v[5];
    return MEMSNAP_OK;
}

MSNAP_EXPORT void memsnap_trace_block(int action, int device, uint64_t addr, uint64_t size,
                                      uint64_t stream)
{
    if (action != MEMSNAP_TRACE_BLOCK_ALLOC && action != MEMSNAP_TRACE_BLOCK_FREE &&
        action != MEMSNAP_TRACE_OOM)
        return;
    if (!core_recording())
        return;
    t_in_hook++;
    msnap_event e;
    memset(&e, 0, sizeof e);
    e.t_ns = core_stamp();
    e.api = MSNAP_API_ALLOCATOR;
    e.device = (int16_t)device;
    e.size = size;
    e.stream = stream;
    if (action == MEMSNAP_TRACE_OOM) {
        e.action = MSNAP_A_OOM;
        e.result = 2;   /* CUDA_ERROR_OUT_OF_MEMORY */
        hooks_mem_info(&e.aux, &e.aux2);
    } else {
        e.action = action == MEMSNAP_TRACE_BLOCK_ALLOC ? MSNAP_A_BLOCK_ALLOC : MSNAP_A_BLOCK_FREE;
        e.addr = addr;
    }
    e.stack = core_capture_stack();
    core_emit(&e, action == MEMSNAP_TRACE_OOM);
    t_in_hook--;
}

/* For tests and benchmarks (torch.pymemo): how many of the calling
 * thread's Python-only captures the memo of its last stack answered
 * (pyframes.c, "The last stack again"). */
MSNAP_EXPORT uint64_t memsnap_bench_memo_served(void)
{
    return pyframes_memo_served();
}

/* For benchmarks (bench/walk_stats.py): the calling thread's Python walks,
 * as pyframes_walk_stats says: walks, memo, proven, code-table asks,
 * frames kept. */
MSNAP_EXPORT int memsnap_bench_walk_stats(uint64_t *out, int n)
{
    return out && n > 0 ? pyframes_walk_stats(out, n) : 0;
}

/* For benchmarks only (bench/bench_overhead.py, default-levels): 0 makes
 * every later event stackless, as --stack-depth 0 would have; 1 gives the
 * setting back.  So one recorded process can time its steps with and
 * without the stack capture side by side. */
MSNAP_EXPORT void memsnap_bench_stacks(int on)
{
    static int saved = -1;
    if (!on && saved < 0) {
        saved = g_cfg.stack_depth;
        g_cfg.stack_depth = 0;
    } else if (on && saved >= 0) {
        g_cfg.stack_depth = saved;
        saved = -1;
    }
}
