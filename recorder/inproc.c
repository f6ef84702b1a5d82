/* Recording without LD_PRELOAD: the recorder loaded into a running process
 * (the Python package's memsnap.record(), docs/python.md), public API in
 * include/memsnap/memsnap.h.
 *
 * Loaded with dlopen(RTLD_LOCAL) (Python's ctypes), the library's hooks
 * interpose nothing: the driver's functions stay the program's, so the
 * driver-level events (reserved memory, VMM, the driver's OOMs) need
 * `memsnap run`.  What it records is what reaches its API: PyTorch's
 * caching allocator through the plugin's trace tracker (memsnap_record_torch
 * attaches it), allocators that call memsnap_trace_block, and
 * memsnap_annotate's marks; each with the calling thread's native and
 * Python frames, on the same hot path and writer as under `memsnap run`.
 *
 * Recordings come one after another in one process (a test suite records
 * each test): memsnap_record_start opens a new file, memsnap_record_stop
 * writes the live state, symbols and trailer and closes it, and the next
 * start begins afresh (no live objects, times from its own start), keeping
 * what is the process's: the stack and string tables, the plugin, the
 * Python frames' table.  Settings are read once, from MEMSNAP_* when the
 * library is loaded, as under `memsnap run`, but for the output (the start's
 * path) and the dump signal, which is never taken here.
 *
 * Still never a CUDA call of its own but those the hooks make (the first
 * event of a device asks its name, total and bus id; docs/recorder.md), no
 * change to what the program sees, and nothing in a constructor.
 */
#include <stdio.h>
#include <string.h>

#include "memsnap/memsnap.h"
#include "recorder.h"
#include "torch.h"

MSNAP_EXPORT int memsnap_record_start(const char *path)
{
    if (!path || !*path)
        return MEMSNAP_ERR_IO;
    int rc = core_inproc_start(path);
    return rc == 0 ? MEMSNAP_OK : rc == -3 ? MEMSNAP_ERR_BUSY : rc == -2 ? MEMSNAP_ERR_IO
                                                                         : MEMSNAP_ERR_OFF;
}

MSNAP_EXPORT int memsnap_record_stop(uint64_t *events)
{
    int rc = core_inproc_stop(events);
    return rc == 0 ? MEMSNAP_OK : rc == -2 ? MEMSNAP_ERR_IO : MEMSNAP_ERR_OFF;
}

MSNAP_EXPORT int memsnap_record_torch(int attach, char *msg, size_t msglen)
{
    char buf[512];
    if (!msg || !msglen) {
        msg = buf;
        msglen = sizeof buf;
    }
    msg[0] = 0;
    if (!g_cfg.enabled || g_cfg.torch_off) {
        snprintf(msg, msglen, g_cfg.torch_off ? "MEMSNAP_TORCH=off" : "recording is off");
        return MEMSNAP_TORCH_NOT_FOUND;
    }
    /* a tracker attached before any recording must not start one */
    if (core_inproc_claim() != 0) {
        snprintf(msg, msglen, "this process is recorded by memsnap run (the recorder is "
                 "preloaded), which attaches PyTorch itself");
        return MEMSNAP_TORCH_NOT_FOUND;
    }
    return torch_inproc(attach, msg, msglen);
}
