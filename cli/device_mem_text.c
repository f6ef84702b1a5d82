/* The device memory line of replay and predict (device_mem_text.h). */
#include "device_mem_text.h"

#include <inttypes.h>
#include <stdio.h>

#include "util/human.h"

static const char *sz(uint64_t b, int exact, char *buf, size_t n)
{
    if (exact)
        snprintf(buf, n, "%" PRIu64, b);
    else
        msnap_size_text(b, buf, n);
    return buf;
}

void cli_device_mem_text(const msnap_replay_result *r, int exact, char *buf, size_t n)
{
    char d[32], o[32], c[32], l[32], a[32];
    sz(r->device_mem, exact, d, sizeof d);
    if (r->device_mem_from[0] == '-') {          /* --device-mem: all the allocator's */
        snprintf(buf, n, "device memory %s (from --device-mem), all of it the allocator's", d);
        return;
    }
    const char *from = r->device_mem_from[4] == 'r' ? "the recording's" : "the default";
    if (!r->outside) {
        snprintf(buf, n, "device memory %s (%s); %s", d, from,
                 r->outside_measured ? "the recording measured nothing outside the allocator"
                                     : "the recording has no device-used samples, so the CUDA "
                                       "context is not counted (--device-mem sets what the "
                                       "allocator gets)");
        return;
    }
    sz(r->outside, exact, o, sizeof o);
    sz(r->outside_context, exact, c, sizeof c);
    sz(r->outside_libs, exact, l, sizeof l);
    sz(r->available, exact, a, sizeof a);
    char parts[160];
    if (r->outside_measured && r->outside_libs)
        snprintf(parts, sizeof parts, "%s CUDA context and other processes, %s other libraries'",
                 c, l);
    else if (r->outside_measured)
        snprintf(parts, sizeof parts, "the CUDA context and other processes");
    else
        snprintf(parts, sizeof parts, "other libraries' driver memory; no device-used samples, so "
                 "the CUDA context is not counted");
    snprintf(buf, n, "device memory %s (%s), less %s the recording measured outside the "
             "allocator (%s): %s for the allocator (--device-mem SIZE gives it all of SIZE)",
             d, from, o, parts, a);
}
