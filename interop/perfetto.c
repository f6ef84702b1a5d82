/* perfetto: a memsnap snapshot as a Chrome/Perfetto trace (the JSON
 * "traceEvents" format that ui.perfetto.dev and chrome://tracing load).
 *
 * One read through the analysis library (analyze/analysis.h); memory is
 * the live set and the tables.  What is written:
 *   - per device d a process "GPU d" (pid 1000000 + d) with counter tracks
 *     ("ph":"C") "allocated" and "reserved" (bytes), and "async" when
 *     stream-ordered memory is seen — one sample at every change;
 *   - OOMs as instant events ("ph":"i") on the device's process, with the
 *     request, device free/total and the API in args;
 *   - NVTX ranges as "B"/"E" slices per recorded thread (pid = the recorded
 *     pid, tid = the thread), NVTX marks and dumps as thread instants.
 * Timestamps are microseconds with ns precision (three decimals), since
 * the Unix epoch (the header's t0_unix_ns + t), the time base of PyTorch's
 * profiler traces (Kineto's "ts") and of its memory snapshots' time_us, so
 * a memsnap trace and a profiler trace of one run line up when both are
 * opened in ui.perfetto.dev; from the recording's start when the header has
 * no wall-clock start.
 */
#include "interop.h"
#include "analyze/analysis.h"
#include "common.h"
#include "util/size.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define GPU_PID 1000000

static uint64_t g_t0;   /* the trace's time base (the read is single-threaded) */

/* A timestamp: the epoch's microseconds of t_ns (t0 + t, saturating). */
static void ts(FILE *f, uint64_t t_ns)
{
    uint64_t t = msnap_add_sat(g_t0, t_ns);
    fprintf(f, "%" PRIu64 ".%03u", t / 1000, (unsigned)(t % 1000));
}

/* The export's state beside the an_file's (analysis.h). */
typedef struct pf {
    FILE *out;
    msnap_interop_stats *st;
    uint64_t res[MSNAP_ST_NDEV], alloc[MSNAP_ST_NDEV]; /* levels before the event */
    uint64_t last_res[MSNAP_ST_NDEV], last_alloc[MSNAP_ST_NDEV], last_async[MSNAP_ST_NDEV];
    int named[MSNAP_ST_NDEV];
    int64_t pid;
    int first;
} pf;

#define SEP(x) (fputs((x)->first ? "" : ",\n", (x)->out), (x)->first = 0)

static int pf_before(void *ctx, an_file *f, const msnap_event *e)
{
    pf *x = ctx;
    int d = msnap_st_slot(e->device);
    x->res[d] = f->st.lv[d][MSNAP_LAYER_RESERVED].cur;
    x->alloc[d] = f->st.lv[d][MSNAP_LAYER_ALLOCATED].cur;
    return 0;
}

static int pf_record(void *ctx, an_file *f, const msnap_record *rec)
{
    pf *x = ctx;
    FILE *out = x->out;
    if (rec->type == MSNAP_REC_HEADER) {
        x->pid = rec->u.header.pid;
        g_t0 = rec->u.header.t0_unix_ns;
        x->st->wall_clock = g_t0 != 0;
        SEP(x);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%" PRId64
                     ",\"args\":{\"name\":", x->pid);
        jw_str(out, rec->u.header.argc > 0 ? rec->u.header.argv[0] : "process");
        fputs("}}", out);
        return 0;
    }
    if (rec->type != MSNAP_REC_EVENT)
        return 0;
    const msnap_event *e = &rec->u.event;
    x->st->events_in++;
    int d = msnap_st_slot(e->device);
    const msnap_level *lv = f->st.lv[d];
    uint64_t reserved = lv[MSNAP_LAYER_RESERVED].cur, allocated = lv[MSNAP_LAYER_ALLOCATED].cur,
             async = lv[MSNAP_LAYER_ASYNC].cur;
    int have_blocks = f->st.allocated_seen;
    int ch = reserved != x->res[d] || allocated != x->alloc[d];
    if (!x->named[d] && e->device >= 0 && (ch || e->action == MSNAP_A_ASYNC_ALLOC ||
                                           e->action == MSNAP_A_OOM)) {
        x->named[d] = 1;
        SEP(x);
        fprintf(out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":"
                     "\"GPU %d\"}}", GPU_PID + e->device, e->device);
    }
    if (e->device >= 0) {
        if (reserved != x->last_res[d] || (have_blocks && allocated != x->last_alloc[d])) {
            x->last_res[d] = reserved;
            SEP(x);
            fprintf(out, "{\"ph\":\"C\",\"name\":\"reserved\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
            ts(out, e->t_ns);
            fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", reserved);
            x->st->events_out++;
            if (have_blocks) {
                x->last_alloc[d] = allocated;
                SEP(x);
                fprintf(out, "{\"ph\":\"C\",\"name\":\"allocated\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
                ts(out, e->t_ns);
                fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", allocated);
                x->st->events_out++;
            }
        }
        if (async != x->last_async[d] &&
            (e->action == MSNAP_A_ASYNC_ALLOC || e->action == MSNAP_A_ASYNC_FREE)) {
            x->last_async[d] = async;
            SEP(x);
            fprintf(out, "{\"ph\":\"C\",\"name\":\"async\",\"pid\":%d,\"ts\":", GPU_PID + e->device);
            ts(out, e->t_ns);
            fprintf(out, ",\"args\":{\"bytes\":%" PRIu64 "}}", async);
            x->st->events_out++;
        }
    }
    const char *msg = NULL;
    switch (e->action) {
    case MSNAP_A_OOM:
    case MSNAP_A_ALLOC_ERROR:
        SEP(x);
        fprintf(out, "{\"ph\":\"i\",\"s\":\"p\",\"name\":\"%s\",\"pid\":%d,\"tid\":%u,\"ts\":",
                e->action == MSNAP_A_OOM ? "OOM" : "allocation error",
                GPU_PID + (e->device >= 0 ? e->device : 0), e->tid);
        ts(out, e->t_ns);
        fprintf(out, ",\"args\":{\"requested\":%" PRIu64 ",\"device_free\":%" PRIu64
                     ",\"device_total\":%" PRIu64 ",\"api\":\"%s\",\"cuda_result\":%d,\"stack\":%u}}",
                e->size, e->aux, e->aux2, msnap_api_name(e->api), e->result, e->stack);
        x->st->events_out++;
        break;
    case MSNAP_A_NVTX_PUSH:
    case MSNAP_A_NVTX_MARK:
    case MSNAP_A_DUMP:
        msg = sm_symtab_str(&f->tab, (uint32_t)e->aux);
        SEP(x);
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
                e->action == MSNAP_A_DUMP ? "memsnap" : "nvtx", x->pid, e->tid);
        ts(out, e->t_ns);
        fputs("}", out);
        x->st->events_out++;
        break;
    case MSNAP_A_NVTX_POP:
        SEP(x);
        fprintf(out, "{\"ph\":\"E\",\"pid\":%" PRId64 ",\"tid\":%u,\"ts\":", x->pid, e->tid);
        ts(out, e->t_ns);
        fputs("}", out);
        x->st->events_out++;
        break;
    }
    return 0;
}

int msnap_export_perfetto(const char *in_path, FILE *out, msnap_interop_stats *st, char *err,
                          size_t errlen)
{
    msnap_interop_stats dummy;
    if (!st)
        st = &dummy;
    memset(st, 0, sizeof *st);
    pf *x = calloc(1, sizeof *x);
    an_file *f = malloc(sizeof *f);
    if (!x || !f) {
        free(x);
        free(f);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    x->out = out;
    x->st = st;
    x->first = 1;
    g_t0 = 0;
    memset(x->last_res, 0xff, sizeof x->last_res);
    memset(x->last_alloc, 0xff, sizeof x->last_alloc);
    memset(x->last_async, 0xff, sizeof x->last_async);
    an_init(f, in_path);
    an_observer o = {.ctx = x, .record = pf_record, .event_before = pf_before};
    int rc = -1;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
    if (an_observe(f, &o)) {
        snprintf(err, errlen, "out of memory");
    } else if (an_read(f, err, errlen)) {
        an_strip_path(f, err);
    } else {
        fputs("\n]}\n", out);
        if (fflush(out) || ferror(out)) {
            snprintf(err, errlen, "cannot write the output: %s", strerror(errno));
        } else {
            for (int d = 0; d < MSNAP_ST_NDEV; d++)
                st->devices += x->named[d];
            rc = 0;
        }
    }
    an_free(f);
    free(f);
    free(x);
    return rc;
}
