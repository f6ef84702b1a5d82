/* Differential libFuzzer target: the reader's hand-written event-line parser
 * against the cJSON path (the reference).  The input is one line; whenever
 * the fast parser accepts it, the cJSON path must accept it too and produce
 * the same event.  64-bit fields are compared as doubles, because a decimal
 * number at or above 2^53 is exact in the fast parser and rounded by cJSON
 * (docs/format.md: writers use hex strings there).  Built with
 * -DMEMSNAP_FUZZ=ON; includes read.c to reach its static functions. */
#include <stdlib.h>

#include "../../format/read.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char line[4097];
    static msnap_record rec;
    if (size > 4096 || memchr(data, '\n', size))
        return 0;
    memcpy(line, data, size);
    line[size] = 0;
    msnap_event fast;
    if (!parse_event_fast(line, line + size, &fast))
        return 0;
    msnap_reader r;
    memset(&r, 0, sizeof r);
    r.lineno = 2;
    int rc = parse_json_line(&r, line, size, 1, &rec);
    const msnap_event *s = &rec.u.event;
#define SAME64(f) ((double)fast.f == (double)s->f)
    int same = rc == 1 && rec.type == MSNAP_REC_EVENT && SAME64(t_ns) && SAME64(addr) &&
               SAME64(size) && SAME64(stream) && SAME64(aux) && SAME64(aux2) && SAME64(seq) &&
               fast.stack == s->stack && fast.tid == s->tid && fast.action == s->action &&
               fast.api == s->api && fast.device == s->device && fast.result == s->result;
    cJSON_Delete(r.cur);
    if (!same) {
        fprintf(stderr, "fast and cJSON parsers disagree (rc %d, %s) on: %s\n", rc, r.err, line);
        abort();
    }
    return 0;
}
