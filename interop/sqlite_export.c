/* sqlite_export: snapshots as SQLite tables, for SQL over a big job's rank
 * files (`memsnap export --format sqlite -o job.db rank*.msnap`), in the
 * spirit of Nsight Systems' SQLite export: plain tables, one row per thing,
 * every row tagged with its file and rank so the ranks of a job can be
 * queried together.  docs/interop.md has the schema and example queries.
 *
 *   files        file_id, rank, path, pid, host, argv, t0_unix_ns, events
 *   devices      file_id, rank, device, name, total
 *   events       every event, with the device's allocated/reserved/async
 *                bytes right after it (the running totals `memsnap summary`
 *                keeps: reserved = cuMemAlloc + cuMemCreate, allocated =
 *                allocator blocks; interop/track.c applies the rules)
 *   allocations  every allocation of every layer with its alloc and free
 *                time (t_free NULL: live at the end)
 *   segments     the driver-level allocations live at the end
 *   pools        PyTorch's pools (analyze/pools.h): per device the default
 *                pool and each private pool with its kind and figures;
 *                allocations.pool names a block's pool
 *   stacks       stack id, depth, site label
 *   frames       stack id, level (0 = innermost), ip, function, file, line,
 *                module
 *   sites        stack id -> label and site_key (the site across files:
 *                analyze/label.c's sm_site_label and sm_site_key)
 *   counters     the recorder's periodic counters records
 *
 * Rank: the number after "rank" in the file name (job.rank3.msnap,
 * trace_rank_07.msnap), else the file's position among the arguments.
 *
 * Each file is read once, through the analysis library (analyze/): the
 * rows of its events as the read goes, the live objects, stacks, frames
 * and site labels (analyze/label.c) at its end.  One transaction per file; the database is written to OUT.tmp and renamed at the end, so a
 * failed export leaves nothing behind.  Without libsqlite3 at build time the
 * format is left out and says so (MEMSNAP_HAVE_SQLITE).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interop.h"
#include "util/outfile.h"

#ifndef MEMSNAP_HAVE_SQLITE

/* This build has no SQLite support: always -1 with the reason. */
int msnap_export_sqlite(char **snaps, int nsnaps, const char *outp, char *err, size_t errlen)
{
    (void)nsnaps;
    (void)snaps;
    (void)outp;
    snprintf(err, errlen, "this memsnap was built without SQLite (Debian package "
                          "libsqlite3-dev); --format sqlite is not available");
    return -1;
}

#else

#include <ctype.h>
#include <inttypes.h>
#include <sqlite3.h>

#include "analyze/analysis.h"
#include "analyze/pools.h"
#include "common.h"
#include "memsnap/format.h"

static const char schema[] =
    "CREATE TABLE files(file_id INTEGER PRIMARY KEY, rank INTEGER, path TEXT, pid INTEGER,"
    " host TEXT, argv TEXT, t0_unix_ns INTEGER, events INTEGER);"
    "CREATE TABLE devices(file_id INTEGER, rank INTEGER, device INTEGER, name TEXT, total INTEGER);"
    "CREATE TABLE events(file_id INTEGER, rank INTEGER, idx INTEGER, t_ns INTEGER, action TEXT,"
    " device INTEGER, addr INTEGER, size INTEGER, stream INTEGER, aux INTEGER, aux2 INTEGER,"
    " stack_id INTEGER, tid INTEGER, api TEXT, result INTEGER,"
    " allocated INTEGER, reserved INTEGER, async INTEGER);"
    "CREATE TABLE allocations(file_id INTEGER, rank INTEGER, layer TEXT, device INTEGER,"
    " addr INTEGER, size INTEGER, stream INTEGER, stack_id INTEGER, t_alloc INTEGER,"
    " t_free INTEGER, pool INTEGER);"
    "CREATE TABLE pools(file_id INTEGER, rank INTEGER, device INTEGER, pool INTEGER,"
    " torch_first INTEGER, torch_second INTEGER, kind TEXT, peak_reserved INTEGER,"
    " peak_allocated INTEGER, final_reserved INTEGER, final_allocated INTEGER,"
    " blocks INTEGER, segments INTEGER);"
    "CREATE TABLE segments(file_id INTEGER, rank INTEGER, layer TEXT, device INTEGER,"
    " addr INTEGER, size INTEGER, stream INTEGER, stack_id INTEGER, t_alloc INTEGER);"
    "CREATE TABLE stacks(file_id INTEGER, rank INTEGER, stack_id INTEGER, depth INTEGER,"
    " site TEXT);"
    "CREATE TABLE frames(file_id INTEGER, rank INTEGER, stack_id INTEGER, level INTEGER,"
    " ip INTEGER, function TEXT, file TEXT, line INTEGER, module TEXT);"
    "CREATE TABLE sites(file_id INTEGER, rank INTEGER, stack_id INTEGER, label TEXT,"
    " site_key INTEGER);"
    "CREATE TABLE counters(file_id INTEGER, rank INTEGER, t_ns INTEGER, device INTEGER,"
    " reserved INTEGER, allocated INTEGER, async INTEGER, managed INTEGER, host INTEGER,"
    " vmm_mapped INTEGER);";

static const char indexes[] =
    "CREATE INDEX events_by_file ON events(file_id, device, t_ns);"
    "CREATE INDEX allocations_by_file ON allocations(file_id, stack_id);"
    "CREATE INDEX sites_by_file ON sites(file_id, stack_id);";

static const char *layer_name(int layer)
{
    switch (layer) {
    case TRK_ALLOC: return "alloc";
    case TRK_ASYNC: return "async";
    case TRK_HOST: return "host";
    case TRK_MANAGED: return "managed";
    case TRK_BLOCK: return "block";
    case TRK_VMM_CREATE: return "vmm_create";
    case TRK_VMM_MAP: return "vmm_map";
    case TRK_VMM_RESERVE: return "vmm_reserve";
    }
    return "?";
}

/* The rank in a file name ("rank" then optional '_', '-', '.' then digits),
 * or -1. */
static int rank_of_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *p = base; *p; p++) {
        if (strncasecmp(p, "rank", 4))
            continue;
        const char *q = p + 4;
        while (*q == '_' || *q == '-' || *q == '.')
            q++;
        if (isdigit((unsigned char)*q))
            return atoi(q);
    }
    return -1;
}

/* Prepared statements of one export. */
typedef struct sq {
    sqlite3 *db;
    sqlite3_stmt *file, *dev, *ev, *alloc, *seg, *stack, *frame, *site, *cnt, *pool;
    int file_id, rank;
    char err[1024];
} sq;

static int sq_fail(sq *q, const char *what)
{
    snprintf(q->err, sizeof q->err, "%s: %s", what, sqlite3_errmsg(q->db));
    return -1;
}

/* Binds the values (NULL-terminated list of kinds: 'i' int64, 't' text,
 * 'n' null) and steps.  0 ok, -1 with q->err. */
static int row(sq *q, sqlite3_stmt *s, const char *kinds, ...)
{
    va_list ap;
    va_start(ap, kinds);
    int i = 1;
    sqlite3_bind_int(s, i++, q->file_id);
    sqlite3_bind_int(s, i++, q->rank);
    for (const char *k = kinds; *k; k++, i++) {
        if (*k == 'i')
            sqlite3_bind_int64(s, i, va_arg(ap, int64_t));
        else if (*k == 't')
            sqlite3_bind_text(s, i, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
        else
            sqlite3_bind_null(s, i);
    }
    va_end(ap);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : sq_fail(q, "insert");
}

static int prepare(sq *q)
{
    struct { sqlite3_stmt **s; const char *sql; } st[] = {
        {&q->file, "INSERT INTO files(file_id, rank, path, pid, host, argv, t0_unix_ns, events) "
                   "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
        {&q->dev, "INSERT INTO devices VALUES(?1, ?2, ?3, ?4, ?5)"},
        {&q->ev, "INSERT INTO events VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
                 " ?14, ?15, ?16, ?17, ?18)"},
        {&q->alloc, "INSERT INTO allocations VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
                    " ?11)"},
        {&q->pool, "INSERT INTO pools VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
                   " ?13)"},
        {&q->seg, "INSERT INTO segments VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
        {&q->stack, "INSERT INTO stacks VALUES(?1, ?2, ?3, ?4, ?5)"},
        {&q->frame, "INSERT INTO frames VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
        {&q->site, "INSERT INTO sites VALUES(?1, ?2, ?3, ?4, ?5)"},
        {&q->cnt, "INSERT INTO counters VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
    };
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
        if (sqlite3_prepare_v2(q->db, st[i].sql, -1, st[i].s, NULL) != SQLITE_OK)
            return sq_fail(q, "prepare");
    return 0;
}

static void finalize(sq *q)
{
    sqlite3_stmt *all[] = {q->file, q->dev, q->ev, q->alloc, q->seg, q->stack, q->frame,
                           q->site, q->cnt, q->pool};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        sqlite3_finalize(all[i]);
}

/* An allocation row from a tracker object (t_free 0 = still live); a
 * block's pool (memsnap/format.h: 0 the default pool), NULL for the rest. */
static int alloc_row(sq *q, const trk_obj *o, uint64_t t_free, int live)
{
    int block = o->layer == TRK_BLOCK;
    int64_t pool = (int64_t)msnap_pool_id(o->aux);
    if (live)
        return row(q, q->alloc, block ? "tiiiiiini" : "tiiiiiinn", layer_name(o->layer),
                   (int64_t)o->device, (int64_t)o->addr, (int64_t)o->size, (int64_t)o->stream,
                   (int64_t)o->stack, (int64_t)o->t_ns, pool);
    return row(q, q->alloc, block ? "tiiiiiiii" : "tiiiiiiin", layer_name(o->layer),
               (int64_t)o->device, (int64_t)o->addr, (int64_t)o->size, (int64_t)o->stream,
               (int64_t)o->stack, (int64_t)o->t_ns, (int64_t)t_free, pool);
}

/* The pools table: one row per pool of PyTorch's allocator (pools.h):
 * the MempoolId_t NULL where the file does not say its half (before
 * format 1.3), reserved figures NULL where not known. */
static int pool_rows(sq *q, const an_file *f, const pl_pools *pl)
{
    size_t n;
    const pl_pool *p = pl_pools_of(pl, &n);
    for (size_t i = 0; i < n; i++) {
        uint64_t tid[2] = {0, 0};
        int known = an_pool_torch_id(f, p[i].id, tid) || !p[i].index;
        int64_t dev = p[i].device, id = (int64_t)p[i].id, a = (int64_t)tid[0],
                b = (int64_t)tid[1], pa = (int64_t)p[i].allocated.peak,
                fa = (int64_t)p[i].allocated.cur, pr = (int64_t)p[i].reserved.peak,
                fr = (int64_t)p[i].reserved.cur, nb = (int64_t)p[i].blocks,
                ns = (int64_t)p[i].segments;
        const char *kind = an_pool_kind_name(p[i].kind);
        int rc;
        if (known && p[i].reserved_known)
            rc = row(q, q->pool, "iiiitiiiiii", dev, id, a, b, kind, pr, pa, fr, fa, nb, ns);
        else if (known)
            rc = row(q, q->pool, "iiiitniniii", dev, id, a, b, kind, pa, fa, nb, ns);
        else if (p[i].reserved_known)
            rc = row(q, q->pool, "iinntiiiiii", dev, id, kind, pr, pa, fr, fa, nb, ns);
        else
            rc = row(q, q->pool, "iinntniniii", dev, id, kind, pa, fa, nb, ns);
        if (rc)
            return -1;
    }
    return 0;
}

/* The rows of what is live at the end: every object in allocations, the
 * driver-level ones in segments too. */
static int live_rows(sq *q, const an_file *f)
{
    msnap_obj *objs;
    size_t n;
    if (an_live_objects(f, &objs, &n)) {
        snprintf(q->err, sizeof q->err, "out of memory");
        return -1;
    }
    int rc = 0;
    for (int layer = TRK_ALLOC; !rc && layer < TRK_NLAYERS; layer++)
        for (size_t i = 0; !rc && i < n; i++) {
            trk_obj o = trk_of(&objs[i]);
            if (o.layer == layer)
                rc = alloc_row(q, &o, 0, 1);
        }
    static const int seg_layers[] = {TRK_ALLOC, TRK_ASYNC, TRK_VMM_CREATE, TRK_MANAGED};
    for (size_t k = 0; !rc && k < sizeof seg_layers / sizeof seg_layers[0]; k++)
        for (size_t i = 0; !rc && i < n; i++) {
            trk_obj o = trk_of(&objs[i]);
            if (o.layer == seg_layers[k])
                rc = row(q, q->seg, "tiiiiii", layer_name(o.layer), (int64_t)o.device,
                         (int64_t)o.addr, (int64_t)o.size, (int64_t)o.stream,
                         (int64_t)o.stack, (int64_t)o.t_ns);
        }
    free(objs);
    return rc;
}

/* The stacks, frames and sites of one file, from its tables and labels. */
static int write_stacks(sq *q, an_file *file, const uint32_t *ids, size_t n)
{
    const sm_labels *lab = an_labels(file);
    for (size_t i = 0; i < n; i++) {
        char label[SM_LABEL_MAX];
        sm_site_label(lab, ids[i], label, sizeof label);
        sm_frame_info f;
        int depth = sm_symtab_frame_get(&file->tab, ids[i], -1, &f);
        if (row(q, q->stack, "iit", (int64_t)ids[i], (int64_t)depth, label) ||
            row(q, q->site, "iti", (int64_t)ids[i], label, (int64_t)sm_site_key(lab, ids[i])))
            return -1;
        for (int k = 0; k < depth; k++) {
            memset(&f, 0, sizeof f);
            sm_symtab_frame_get(&file->tab, ids[i], k, &f);
            if (row(q, q->frame, "iiittit", (int64_t)ids[i], (int64_t)k, (int64_t)f.ip,
                    f.fn ? f.fn : "", f.file ? f.file : "", (int64_t)f.line,
                    f.module ? f.module : ""))
                return -1;
        }
    }
    return 0;
}

/* One file's read (an_observer): the header's rows, then a row per event
 * with the levels right after it. */
typedef struct sq_read {
    sq *q;
    uint32_t *ids;             /* stack ids in file order */
    size_t nids, capids;
    uint64_t idx;
} sq_read;

static int sq_record(void *ctx, an_file *f, const msnap_record *rec)
{
    sq_read *x = ctx;
    sq *q = x->q;
    switch (rec->type) {
    case MSNAP_REC_HEADER: {
        const msnap_header *h = &rec->u.header;
        char argv[4096] = "";
        size_t o = 0;
        for (int i = 0; i < h->argc && o < sizeof argv - 1; i++)
            o += (size_t)snprintf(argv + o, sizeof argv - o, "%s%s", i ? " " : "", h->argv[i]);
        int rc = row(q, q->file, "tittin", f->path, (int64_t)h->pid, h->host, argv,
                     (int64_t)h->t0_unix_ns);
        for (int i = 0; !rc && i < h->ndevices; i++)
            rc = row(q, q->dev, "iti", (int64_t)h->devices[i].index, h->devices[i].name,
                     (int64_t)h->devices[i].total);
        return rc;
    }
    case MSNAP_REC_DEVICE:
        return row(q, q->dev, "iti", (int64_t)rec->u.device.index, rec->u.device.name,
                   (int64_t)rec->u.device.total);
    case MSNAP_REC_STACK:
        if (msnap_grow((void **)&x->ids, &x->capids, x->nids, sizeof *x->ids)) {
            snprintf(q->err, sizeof q->err, "out of memory");
            return -1;
        }
        x->ids[x->nids++] = rec->u.stack.id;
        return 0;
    case MSNAP_REC_COUNTERS: {
        const msnap_counters *c = &rec->u.counters;
        return row(q, q->cnt, "iiiiiiii", (int64_t)c->t_ns, (int64_t)c->device,
                   (int64_t)c->reserved, (int64_t)c->allocated, (int64_t)c->async,
                   (int64_t)c->managed, (int64_t)c->host, (int64_t)c->vmm_mapped);
    }
    case MSNAP_REC_EVENT: {
        const msnap_event *e = &rec->u.event;
        const msnap_obj *freed = &f->st.freed;
        const msnap_level *lv = f->st.lv[msnap_st_slot(e->device)];
        int rc = row(q, q->ev, "iitiiiiiiiitiiii", (int64_t)x->idx++, (int64_t)e->t_ns,
                     msnap_action_name(e->action), (int64_t)e->device, (int64_t)e->addr,
                     (int64_t)(e->size ? e->size : freed->size), (int64_t)e->stream,
                     (int64_t)e->aux, (int64_t)e->aux2, (int64_t)e->stack, (int64_t)e->tid,
                     msnap_api_name(e->api), (int64_t)e->result,
                     (int64_t)lv[MSNAP_LAYER_ALLOCATED].cur,
                     (int64_t)lv[MSNAP_LAYER_RESERVED].cur, (int64_t)lv[MSNAP_LAYER_ASYNC].cur);
        if (!rc && freed->size && !trk_kind_of_action(e->action)) {
            trk_obj o = trk_of(freed);
            rc = alloc_row(q, &o, e->t_ns, 0);
        }
        return rc;
    }
    default:
        return 0;
    }
}

/* One snapshot into the open database.  0 ok, -1 with q->err. */
static int export_file(sq *q, const char *path)
{
    char err[1024];
    an_file *f = malloc(sizeof *f);
    sq_read x = {.q = q};
    int rc = -1;
    pl_pools *pl = pl_new();
    if (f)
        an_init(f, path);
    an_observer o = {.ctx = &x, .record = sq_record};
    sqlite3_exec(q->db, "BEGIN", NULL, NULL, NULL);
    if (!f || !pl || an_observe(f, &o) || pl_attach(pl, f)) {
        snprintf(q->err, sizeof q->err, "out of memory");
    } else if (an_read(f, err, sizeof err)) {
        if (!q->err[0])
            snprintf(q->err, sizeof q->err, "%s", err);
    } else if (!live_rows(q, f) && !write_stacks(q, f, x.ids, x.nids) && !pool_rows(q, f, pl)) {
        char sql[128];
        snprintf(sql, sizeof sql, "UPDATE files SET events = %" PRIu64 " WHERE file_id = %d",
                 x.idx, q->file_id);
        if (sqlite3_exec(q->db, sql, NULL, NULL, NULL) != SQLITE_OK)
            sq_fail(q, "update");
        else if (sqlite3_exec(q->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
            sq_fail(q, "commit");
        else
            rc = 0;
    }
    free(x.ids);
    pl_free(pl);
    if (f)
        an_free(f);
    free(f);
    return rc;
}

int msnap_export_sqlite(char **snaps, int nsnaps, const char *outp, char *err, size_t errlen)
{
    size_t n = strlen(outp) + 8;
    char *tmp = malloc(n);
    if (!tmp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    snprintf(tmp, n, "%s.tmp", outp);
    unlink(tmp);
    outfile_track_name(tmp);   /* a signal removes it (util/outfile.h) */
    sq q = {0};
    int rc = 0;
    if (sqlite3_open(tmp, &q.db) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", outp, sqlite3_errmsg(q.db));
        sqlite3_close(q.db);
        unlink(tmp);
        outfile_untrack_name(tmp);
        free(tmp);
        return -1;
    }
    if (sqlite3_exec(q.db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;", NULL, NULL, NULL) ||
        sqlite3_exec(q.db, schema, NULL, NULL, NULL) != SQLITE_OK) {
        rc = sq_fail(&q, "schema");
    } else {
        rc = prepare(&q);
    }
    for (int i = 0; !rc && i < nsnaps; i++) {
        q.file_id = i;
        q.rank = rank_of_name(snaps[i]);
        if (q.rank < 0)
            q.rank = i;
        rc = export_file(&q, snaps[i]);
    }
    if (!rc && sqlite3_exec(q.db, indexes, NULL, NULL, NULL) != SQLITE_OK)
        rc = sq_fail(&q, "index");
    finalize(&q);
    if (sqlite3_close(q.db) != SQLITE_OK && !rc)
        rc = -1;
    if (!rc && rename(tmp, outp)) {
        snprintf(q.err, sizeof q.err, "%s: %s", outp, strerror(errno));
        rc = -1;
    }
    if (rc) {
        unlink(tmp);
        snprintf(err, errlen, "%s", q.err[0] ? q.err : "cannot write the database");
    }
    outfile_untrack_name(tmp);
    free(tmp);
    return rc ? -1 : 0;
}
#endif
