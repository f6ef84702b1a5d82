/* perfetto: a memsnap snapshot as a Chrome/Perfetto trace (the JSON
 * "traceEvents" format that ui.perfetto.dev and chrome://tracing load).
 *
 * One streaming pass; memory is the live set (track.c) and the string
 * table.  What is written:
 *   - per device d a process "GPU d" (pid 1000000 + d) with counter tracks
 *     ("ph":"C") "allocated" and "reserved" (bytes), and "async" when
 *     stream-ordered memory is seen — one sample at every change;
 *   - OOMs as instant events ("ph":"i") on the device's process, with the
 *     request, device free/total and the API in args;
 *   - NVTX ranges as "B"/"E" slices per recorded thread (pid = the recorded
 *     pid, tid = the thread), NVTX marks and dumps as thread instants.
 * Timestamps are microseconds with ns precision (three decimals).
 */
#include "interop.h"
#include "common.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define GPU_PID 1000000

static void ts(FILE *f, uint64_t t_ns)
{
    fprintf(f, "%" PRIu64 ".%03u", t_ns / 1000, (unsigned)(t_ns % 1000));
}

int msnap_export_perfetto(const char *in_path, FILE *out, msnap_interop_stats *st, char *err,
                          size_t errlen)
{
    msnap_interop_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    char rerr[256];
    msnap_reader *r = msnap_reader_open(in_path, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s", rerr);
        return -1;
    }
    track *tr = malloc(sizeof *tr);
    u64map strs = {0};
    char **strv = NULL;
    size_t nstr = 0, capstr = 0;
    uint64_t last_res[TRK_NDEV], last_alloc[TRK_NDEV], last_async[TRK_NDEV];
    int named[TRK_NDEV] = {0};
    memset(last_res, 0xff, sizeof last_res);
    memset(last_alloc, 0xff, sizeof last_alloc);
    memset(last_async, 0xff, sizeof last_async);
    int rc = -1, more;
    int64_t pid = 0;
    msnap_record rec;
    if (!tr) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    track_init(tr);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
    int first = 1;
#define SEP() (fputs(first ? "" : ",\n", out), first = 0)
    while ((more = msnap_reader_next(r, &rec)) == 1) {
        if (rec.type == MSNAP_REC_HEADER) {
            pid = rec.u.header.pid;
            SEP();
            fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64
                         ",\"args\":{\"name\":", pid);
            jw_str(out, rec.u.header.argc > 0 ? rec.u.header.argv[0] : "process");
            fputs("}}", out);
            continue;
        }
        if (rec.type == MSNAP_REC_STR) {
            if (nstr == capstr) {
                capstr = capstr ? capstr * 2 : 64;
                char **nv = realloc(strv, capstr * sizeof *nv);
                if (!nv)
                    goto oom;
                strv = nv;
            }
            strv[nstr] = strdup(rec.u.str.s);
            if (!strv[nstr] || u64map_put(&strs, 0, rec.u.str.id, nstr))
                goto oom;
            nstr++;
            continue;
        }
        if (rec.type != MSNAP_REC_EVENT)
            continue;
        const msnap_event *e = &rec.u.event;
        st->events_in++;
        int ch = track_event(tr, e, NULL);
        if (ch < 0)
            goto oom;
        int d = TRK_DEV(e->device);
        if (!named[d] && e->device >= 0 && (ch || e->action == MSNAP_A_ASYNC_ALLOC ||
                                            e->action == MSNAP_A_OOM)) {
            named[d] = 1;
            SEP();
            fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":"
                         "\"GPU %d\"}}", GPU_PID + e->device, e->device);
        }
        if (e->device >= 0) {
            if (tr->reserved[d] != last_res[d] || (tr->have_blocks && tr->allocated[d] != last_alloc[d])) {
                last_res[d] = tr->reserved[d];
                SEP();
                fprintf(out, "{\"ph\":\"C\",\"name\":\"reserved\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
                ts(out, e->t_ns);
                fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", tr->reserved[d]);
                st->events_out++;
                if (tr->have_blocks) {
                    last_alloc[d] = tr->allocated[d];
                    SEP();
                    fprintf(out, "{\"ph\":\"C\",\"name\":\"allocated\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
                    ts(out, e->t_ns);
                    fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", tr->allocated[d]);
                    st->events_out++;
                }
            }
            if (tr->async[d] != last_async[d] &&
                (e->action == MSNAP_A_ASYNC_ALLOC || e->action == MSNAP_A_ASYNC_FREE)) {
                last_async[d] = tr->async[d];
                SEP();
                fprintf(out, "{\"ph\":\"C\",\"name\":\"async\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
                ts(out, e->t_ns);
                fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", tr->async[d]);
                st->events_out++;
            }
        }
        const char *msg = NULL;
        uint64_t *si;
        switch (e->action) {
        case MSNAP_A_OOM:
        case MSNAP_A_ALLOC_ERROR:
            SEP();
            fprintf(out, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"%s\",\"pid\":%d,\"tid\":%u,\"ts\":",
                    e->action == MSNAP_A_OOM ? "OOM" : "allocation error",
                    GPU_PID + (e->device >= 0 ? e->device : 0), e->tid);
            ts(out, e->t_ns);
            fprintf(out, ",\"args\":{\"requested\":%" PRIu64 ",\"device_free\":%" PRIu64
                         ",\"device_total\":%" PRIu64 ",\"api\":\"%s\",\"cuda_result\":%d,\"stack\":%u}}",
                    e->size, e->aux, e->aux2, msnap_api_name(e->api), e->result, e->stack);
            st->events_out++;
            break;
        case MSNAP_A_NVTX_PUSH:
        case MSNAP_A_NVTX_MARK:
        case MSNAP_A_DUMP:
            si = u64map_get(&strs, 0, e->aux);
            msg = si ? strv[*si] : "";
            SEP();
            fprintf(out, "{\"ph\":\"%s\",%s\"name\":", e->action == MSNAP_A_NVTX_PUSH ? "B" : "i",
                    e->action == MSNAP_A_NVTX_PUSH ? "" : "\"s\":\"t\",");
            if (e->action == MSNAP_A_DUMP) {
                char b[300];
                snprintf(b, sizeof b, "dump: %s", msg);
                jw_str(out, b);
            } else {
                jw_str(out, msg);
            }
            fprintf(out, ",\"cat\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%u,\"ts\":",
                    e->action == MSNAP_A_DUMP ? "memsnap" : "nvtx", pid, e->tid);
            ts(out, e->t_ns);
            fputs("}", out);
            st->events_out++;
            break;
        case MSNAP_A_NVTX_POP:
            SEP();
            fprintf(out, "{\"ph\":\"E\",\"pid\":%" PRId64 ",\"tid\":%u,\"ts\":", pid, e->tid);
            ts(out, e->t_ns);
            fputs("}", out);
            st->events_out++;
            break;
        }
    }
    if (more < 0) {
        snprintf(err, errlen, "%s", msnap_reader_error(r));
        goto done;
    }
    fputs("\n]}\n", out);
    if (fflush(out) || ferror(out)) {
        snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
        goto done;
    }
    for (int d = 0; d < TRK_NDEV; d++)
        st->devices += named[d];
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "out of memory");
done:
    msnap_reader_close(r);
    if (tr)
        track_free(tr);
    free(tr);
    for (size_t i = 0; i < nstr; i++)
        free(strv[i]);
    free(strv);
    u64map_free(&strs);
    return rc;
}
