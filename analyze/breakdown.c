/* Reconciliation with the driver's used figure, by library, and memory by
 * category: one pass over a snapshot (breakdown.h has the definitions).
 *
 * Live state: one u64map from (layer, address or handle) to a packed word
 * (see pack()): the bytes, the device slot, the library and category of
 * the allocating stack, and whether it counts in the categories' blocks
 * view.  Running totals per device are updated on every add and remove,
 * and the moments (peak of recorded memory, highest device_used, total
 * peak of the categories, first OOM) are copies of those totals taken as
 * the pass reaches them.  Library and category are computed once per stack
 * id (cached in the same map under their own tag).
 */
#include "breakdown.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "u64map.h"
#include "summary.h"

enum { TAG_DRIVER = 1, TAG_HANDLE, TAG_BLOCK, TAG_STACK };

/* Packed live entry: size in bits 0-43 (16 TiB), device slot 44-50,
 * library 51-55, category 56-60, torch block 61, blocks view 62. */
#define SIZE_BITS 44
#define SIZE_MASK ((1ull << SIZE_BITS) - 1)

typedef struct entry {
    uint64_t size;
    int dev, lib, cat, torch, bview;
} entry;

/* An entry as one map value (sizes above 16 TiB are cut, the same way on
 * add and remove, so the totals stay consistent). */
static uint64_t pack(const entry *e)
{
    return (e->size & SIZE_MASK) | ((uint64_t)e->dev << 44) |
           ((uint64_t)e->lib << 51) | ((uint64_t)e->cat << 56) |
           ((uint64_t)(e->torch != 0) << 61) | ((uint64_t)(e->bview != 0) << 62);
}

/* The entry a map value holds. */
static entry unpack(uint64_t v)
{
    entry e = {v & SIZE_MASK, (int)((v >> 44) & 0x7f), (int)((v >> 51) & 0x1f),
               (int)((v >> 56) & 0x1f), (int)((v >> 61) & 1), (int)((v >> 62) & 1)};
    return e;
}

struct breakdown {
    const cat_rules *rules;
    const sm_symtab *syms;
    char libs[BD_MAX_LIBS][64];
    int nlibs;
    bd_device dev[BD_NDEV];
    u64map live;
    uint64_t last_t;           /* largest event time read */
    uint64_t nevents;          /* events read */
    /* the last removed entry, so that a free_error can put it back */
    uint32_t undo_tag;
    uint64_t undo_key, undo_val;
    int undo_valid;
};

breakdown *bd_new(const cat_rules *rules)
{
    breakdown *b = calloc(1, sizeof *b);
    if (b)
        b->rules = rules;
    return b;
}

void bd_free(breakdown *b)
{
    if (!b)
        return;
    u64map_free(&b->live);
    free(b);
}

const bd_device *bd_device_of(const breakdown *b, int dev)
{
    return dev >= 0 && dev < BD_NDEV ? &b->dev[dev] : NULL;
}

const char *bd_lib_name(const breakdown *b, int lib)
{
    return lib >= 0 && lib < b->nlibs ? b->libs[lib] : "";
}

/* Device slot of an ordinal. */
static int dev_slot(int d)
{
    return d >= 0 && d < MSNAP_MAX_DEVICES ? d : MSNAP_MAX_DEVICES;
}

/* Library slot of a name, added when new; the last slot gathers the rest. */
static int lib_slot(breakdown *b, const char *name)
{
    for (int i = 0; i < b->nlibs; i++)
        if (strcmp(b->libs[i], name) == 0)
            return i;
    if (b->nlibs == BD_MAX_LIBS - 1) {
        snprintf(b->libs[b->nlibs], sizeof b->libs[0], "other libraries");
        return b->nlibs++;
    }
    if (b->nlibs >= BD_MAX_LIBS)
        return BD_MAX_LIBS - 1;
    snprintf(b->libs[b->nlibs], sizeof b->libs[0], "%s", name);
    return b->nlibs++;
}

/* Library and category of a stack, cached.  -1 when out of memory. */
static int classify(breakdown *b, uint32_t stack, int *lib, int *cat)
{
    uint64_t *v = u64map_get(&b->live, TAG_STACK, stack);
    if (v) {
        *lib = (int)(*v & 0xff);
        *cat = (int)(*v >> 8);
        return 0;
    }
    char name[256];
    *lib = lib_slot(b, cat_library_stack(b->syms, stack, name, sizeof name));
    *cat = cat_classify_stack(b->rules, b->syms, stack);
    return u64map_put(&b->live, TAG_STACK, stack,
                      (uint64_t)*lib | ((uint64_t)*cat << 8));
}

/* Takes a copy of the device's running totals as a moment. */
static void take_moment(const bd_device *v, bd_moment *m, uint64_t t)
{
    m->valid = 1;
    m->t = t;
    m->recorded = v->recorded;
    m->torch_reserved = v->torch_seg;
    m->torch_allocated = v->torch_blk;
    memcpy(m->by_lib, v->by_lib, sizeof m->by_lib);
}

/* Adds (sign +1) or removes (-1) bytes of category cat in a view. */
static void cats_change(bd_cats *c, int cat, uint64_t n, int sign, uint64_t t)
{
    if (sign > 0) {
        c->cur[cat] += n;
        c->total += n;
        if (c->cur[cat] > c->peak[cat])
            c->peak[cat] = c->cur[cat];
        if (c->total > c->total_peak) {
            c->total_peak = c->total;
            c->total_peak_t = t;
            memcpy(c->at_peak, c->cur, sizeof c->at_peak);
        }
    } else {
        c->cur[cat] -= n < c->cur[cat] ? n : c->cur[cat];
        c->total -= n < c->total ? n : c->total;
    }
}

/* Applies a live entry to the running totals (sign +1 add, -1 remove). */
static void apply(breakdown *b, uint32_t tag, const entry *e, int sign,
                  uint64_t t)
{
    bd_device *v = &b->dev[e->dev];
    v->seen = 1;
    uint64_t n = e->size;
#define ADJ(x) ((x) = sign > 0 ? (x) + n : (x) - (n < (x) ? n : (x)))
    if (tag == TAG_BLOCK) {
        v->blocks_seen = 1;
        if (e->torch) {
            v->torch_blocks_seen = 1;
            ADJ(v->torch_blk);
        }
    } else {
        ADJ(v->recorded);
        ADJ(v->by_lib[e->lib]);
        cats_change(&v->driver_view, e->cat, n, sign, t);
        if (sign > 0 && v->recorded > v->at_peak.recorded)
            take_moment(v, &v->at_peak, t);
    }
#undef ADJ
    if (e->bview)
        cats_change(&v->blocks_view, e->cat, n, sign, t);
}

/* A new live object.  -1 when out of memory. */
static int add(breakdown *b, uint32_t tag, uint64_t key, int device,
               uint64_t size, uint32_t stack, int torch, uint64_t t)
{
    entry e = {size, dev_slot(device), 0, 0, torch, 0};
    if (classify(b, stack, &e.lib, &e.cat) != 0)
        return -1;
    const char *ln = b->libs[e.lib];
    /* Driver memory of an unknown library is left out of the blocks view
     * too: without frames it cannot be told from an allocator's segment. */
    e.bview = tag == TAG_BLOCK ||
              (strcmp(ln, CAT_LIB_TORCH) != 0 && strcmp(ln, CAT_LIB_MEMSNAP) != 0 &&
               strcmp(ln, CAT_LIB_UNKNOWN) != 0);
    uint64_t *old = u64map_get(&b->live, tag, key);
    if (old) {               /* the same key twice: the first is gone */
        entry o = unpack(*old);
        apply(b, tag, &o, -1, t);
    }
    if (u64map_put(&b->live, tag, key, pack(&e)) != 0)
        return -1;
    apply(b, tag, &e, +1, t);
    return 0;
}

/* A live object goes (unknown keys are ignored: allocated before the file). */
static void del(breakdown *b, uint32_t tag, uint64_t key, uint64_t t)
{
    uint64_t v;
    if (!u64map_del(&b->live, tag, key, &v))
        return;
    entry e = unpack(v);
    apply(b, tag, &e, -1, t);
    b->undo_tag = tag;
    b->undo_key = key;
    b->undo_val = v;
    b->undo_valid = 1;
}

/* One event.  -1 when out of memory. */
static int on_event(breakdown *b, const msnap_event *e)
{
    b->nevents++;
    if (e->t_ns > b->last_t)
        b->last_t = e->t_ns;
    uint64_t t = e->t_ns;
    switch (e->action) {
    case MSNAP_A_ALLOC:
    case MSNAP_A_ASYNC_ALLOC:
        return add(b, TAG_DRIVER, e->addr, e->device, e->size, e->stack, 0, t);
    case MSNAP_A_VMM_CREATE:
        if (e->device < 0)
            return 0;
        return add(b, TAG_HANDLE, e->aux, e->device, e->size, e->stack, 0, t);
    case MSNAP_A_BLOCK_ALLOC:
        return add(b, TAG_BLOCK, e->addr, e->device, e->size, e->stack,
                   e->api == MSNAP_API_TORCH, t);
    case MSNAP_A_FREE:
    case MSNAP_A_ASYNC_FREE:
        del(b, TAG_DRIVER, e->addr, t);
        return 0;
    case MSNAP_A_VMM_RELEASE:
        del(b, TAG_HANDLE, e->aux, t);
        return 0;
    case MSNAP_A_BLOCK_FREE:
        del(b, TAG_BLOCK, e->addr, t);
        return 0;
    case MSNAP_A_FREE_ERROR:
        if (b->undo_valid && b->undo_tag == TAG_DRIVER && b->undo_key == e->addr &&
            !u64map_get(&b->live, TAG_DRIVER, e->addr)) {
            entry u = unpack(b->undo_val);
            if (u64map_put(&b->live, TAG_DRIVER, e->addr, b->undo_val) != 0)
                return -1;
            apply(b, TAG_DRIVER, &u, +1, t);
        }
        b->undo_valid = 0;
        return 0;
    case MSNAP_A_SEGMENT_ALLOC:
    case MSNAP_A_SEGMENT_MAP:
    case MSNAP_A_SEGMENT_FREE:
    case MSNAP_A_SEGMENT_UNMAP: {
        bd_device *v = &b->dev[dev_slot(e->device)];
        v->seen = 1;
        v->torch_segments_seen = 1;
        if (e->action == MSNAP_A_SEGMENT_ALLOC || e->action == MSNAP_A_SEGMENT_MAP)
            v->torch_seg += e->size;
        else
            v->torch_seg -= e->size < v->torch_seg ? e->size : v->torch_seg;
        return 0;
    }
    case MSNAP_A_OOM: {
        bd_device *v = &b->dev[dev_slot(e->device)];
        bd_cats *views[2] = {&v->blocks_view, &v->driver_view};
        for (int i = 0; i < 2; i++)
            if (!views[i]->oom_seen) {
                views[i]->oom_seen = 1;
                views[i]->oom_t = t;
                memcpy(views[i]->at_oom, views[i]->cur, sizeof views[i]->at_oom);
            }
        return 0;
    }
    default:
        return 0;
    }
}

/* A live record of a state section: added when the pass has not seen it
 * (a ring dump's allocations from before its oldest event). */
static int on_live(breakdown *b, const msnap_live *l)
{
    uint32_t tag;
    uint64_t key = l->addr;
    switch (l->kind) {
    case MSNAP_A_ALLOC:
    case MSNAP_A_ASYNC_ALLOC: tag = TAG_DRIVER; break;
    case MSNAP_A_BLOCK_ALLOC: tag = TAG_BLOCK; break;
    case MSNAP_A_VMM_CREATE:
        if (l->device < 0)
            return 0;
        tag = TAG_HANDLE;
        key = l->aux;
        break;
    default: return 0;
    }
    if (u64map_get(&b->live, tag, key))
        return 0;
    if (add(b, tag, key, l->device, l->size, l->stack, 0, l->t_ns) != 0)
        return -1;
    /* It was live at the device-used moment too when that moment is this
     * dump's (a ring dump writes its last counters line, then the state). */
    bd_device *v = &b->dev[dev_slot(l->device)];
    if (tag != TAG_BLOCK && v->at_used.valid && v->at_used.t >= b->last_t &&
        v->at_used.t >= l->t_ns) {
        entry e = unpack(*u64map_get(&b->live, tag, key));
        v->at_used.recorded += e.size;
        v->at_used.by_lib[e.lib] += e.size;
    }
    return 0;
}

/* A counters record: the moment of the highest device_used so far.  Only
 * records after the events they describe count: in a ring dump the series
 * comes before the events, and only the last line follows them. */
static void on_counters(breakdown *b, const msnap_counters *c)
{
    if (c->device < 0 || c->device >= MSNAP_MAX_DEVICES || !c->device_used ||
        !b->nevents || c->t_ns < b->last_t)
        return;
    bd_device *v = &b->dev[c->device];
    v->seen = 1;
    if (v->at_used.valid && c->device_used < v->at_used.device_used)
        return;
    take_moment(v, &v->at_used, c->t_ns);
    v->at_used.used_recorded = 1;
    v->at_used.device_used = c->device_used;
}

int bd_read(breakdown *b, const char *path, const sm_symtab *t, char *err,
            size_t errlen)
{
    char e[512];
    b->syms = t;
    msnap_reader *r = msnap_reader_open(path, e, sizeof e);
    if (!r) {
        snprintf(err, errlen, "%s: %s", path, e);
        return 2;
    }
    msnap_record rec;
    int rc, bad = 0;
    while (!bad && (rc = msnap_reader_next(r, &rec)) == 1) {
        if (rec.type == MSNAP_REC_EVENT)
            bad = on_event(b, &rec.u.event);
        else if (rec.type == MSNAP_REC_COUNTERS)
            on_counters(b, &rec.u.counters);
        else if (rec.type == MSNAP_REC_LIVE)
            bad = on_live(b, &rec.u.live);
    }
    if (bad)
        snprintf(err, errlen, "%s: out of memory", path);
    else if (rc < 0)
        snprintf(err, errlen, "%s: %s", path, msnap_reader_error(r));
    msnap_reader_close(r);
    return bad || rc < 0 ? 2 : 0;
}

/* ---- output ------------------------------------------------------------- */

/* Category index of the i-th row shown: the named ones in table order,
 * "other" last. */
static int cat_row(const breakdown *b, int i)
{
    return i + 1 < cat_count(b->rules) ? i + 1 : CAT_OTHER;
}

/* The moment a device's reconciliation is shown at, NULL when none. */
static const bd_moment *moment_of(const bd_device *v)
{
    if (v->at_used.valid)
        return &v->at_used;
    return v->at_peak.valid ? &v->at_peak : NULL;
}

/* PyTorch reserved at a moment: torch segments when the file has them,
 * else the PyTorch allocator's driver memory. */
static uint64_t torch_reserved(const breakdown *b, const bd_device *v,
                               const bd_moment *m)
{
    if (v->torch_segments_seen)
        return m->torch_reserved;
    for (int i = 0; i < b->nlibs; i++)
        if (strcmp(b->libs[i], CAT_LIB_TORCH) == 0)
            return m->by_lib[i];
    return 0;
}

/* Library slots in decreasing bytes at moment m (ties by slot). */
static int libs_sorted(const breakdown *b, const bd_moment *m, int *order)
{
    int n = 0;
    for (int i = 0; i < b->nlibs; i++)
        if (m->by_lib[i])
            order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && m->by_lib[order[j]] > m->by_lib[order[j - 1]]; j--) {
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    return n;
}

/* The categories view shown for a device, and its name. */
static const bd_cats *cats_of(const bd_device *v, const char **layer)
{
    if (v->blocks_seen) {
        *layer = "allocator blocks + other libraries' driver memory";
        return &v->blocks_view;
    }
    *layer = "driver allocations, no allocator blocks seen";
    return &v->driver_view;
}

void bd_print_text(const breakdown *b)
{
    char a[32], c[32], d[32], t[32];
    for (int dv = 0; dv < BD_NDEV; dv++) {
        const bd_device *v = &b->dev[dv];
        const bd_moment *m = moment_of(v);
        if (!v->seen || !m)
            continue;
        int dn = dv == MSNAP_MAX_DEVICES ? -1 : dv;
        printf("\ndevice %d against the driver (at %s, t = %s)\n", dn,
               m->used_recorded ? "the highest device used" : "the peak of recorded memory",
               msnap_time_text(m->t, t, sizeof t));
        if (m->used_recorded)
            printf("  device used (NVML, nvidia-smi) %s\n",
                   msnap_size_text(m->device_used, a, sizeof a));
        else
            printf("  device used: not recorded (no NVML in the recording, or a "
                   "file from before format 1.1)\n");
        printf("  recorded, all libraries       %s\n",
               msnap_size_text(m->recorded, a, sizeof a));
        int order[BD_MAX_LIBS];
        int n = libs_sorted(b, m, order);
        for (int i = 0; i < n; i++)
            printf("    %-27s %s\n", b->libs[order[i]],
                   msnap_size_text(m->by_lib[order[i]], a, sizeof a));
        printf("  PyTorch reserved              %s%s\n",
               msnap_size_text(torch_reserved(b, v, m), a, sizeof a),
               v->torch_segments_seen ? " (its segment events)"
                                      : " (driver memory from libc10_cuda)");
        if (v->torch_blocks_seen)
            printf("  PyTorch allocated             %s\n",
                   msnap_size_text(m->torch_allocated, a, sizeof a));
        else
            printf("  PyTorch allocated             n/a (no torch block "
                   "events)\n");
        if (m->used_recorded) {
            int neg = m->recorded > m->device_used;
            uint64_t diff = neg ? m->recorded - m->device_used
                                : m->device_used - m->recorded;
            printf("  not explained by allocations  %s%s (device used - "
                   "recorded: CUDA context, module images, other processes)\n",
                   neg ? "-" : "", msnap_size_text(diff, a, sizeof a));
        }
    }
    for (int dv = 0; dv < BD_NDEV; dv++) {
        const bd_device *v = &b->dev[dv];
        const char *layer;
        const bd_cats *k = cats_of(v, &layer);
        if (!v->seen || !k->total_peak)
            continue;
        printf("\ndevice %d by category (layer: %s)\n",
               dv == MSNAP_MAX_DEVICES ? -1 : dv, layer);
        if (k->oom_seen)
            printf("  %-18s %-12s %-14s %s\n", "category", "peak",
                   "at total peak", "at first OOM");
        else
            printf("  %-18s %-12s %s\n", "category", "peak", "at total peak");
        for (int r = 0; r < cat_count(b->rules); r++) {
            int i = cat_row(b, r);
            if (!k->peak[i])
                continue;
            if (k->oom_seen)
                printf("  %-18s %-12s %-14s %s\n", cat_name(b->rules, i),
                       msnap_size_text(k->peak[i], a, sizeof a),
                       msnap_size_text(k->at_peak[i], c, sizeof c),
                       msnap_size_text(k->at_oom[i], d, sizeof d));
            else
                printf("  %-18s %-12s %s\n", cat_name(b->rules, i),
                       msnap_size_text(k->peak[i], a, sizeof a),
                       msnap_size_text(k->at_peak[i], c, sizeof c));
        }
        printf("  %-18s %-12s at %s\n", "total",
               msnap_size_text(k->total_peak, a, sizeof a),
               msnap_time_text(k->total_peak_t, t, sizeof t));
    }
}

/* Adds key: v as an exact JSON integer. */
static void add_u64(cJSON *o, const char *key, uint64_t v)
{
    char num[24];
    snprintf(num, sizeof num, "%" PRIu64, v);
    cJSON_AddRawToObject(o, key, num);
}

void bd_add_json(const breakdown *b, cJSON *root)
{
    cJSON *ra = cJSON_AddArrayToObject(root, "reconcile");
    cJSON *ca = cJSON_AddArrayToObject(root, "categories");
    for (int dv = 0; dv < BD_NDEV; dv++) {
        const bd_device *v = &b->dev[dv];
        const bd_moment *m = moment_of(v);
        int dn = dv == MSNAP_MAX_DEVICES ? -1 : dv;
        if (v->seen && m) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "device", dn);
            cJSON_AddStringToObject(o, "moment", m->used_recorded
                                    ? "highest_device_used" : "peak_recorded");
            add_u64(o, "t_ns", m->t);
            if (m->used_recorded)
                add_u64(o, "device_used", m->device_used);
            else
                cJSON_AddNullToObject(o, "device_used");
            add_u64(o, "recorded", m->recorded);
            cJSON *la = cJSON_AddArrayToObject(o, "libraries");
            int order[BD_MAX_LIBS];
            int n = libs_sorted(b, m, order);
            for (int i = 0; i < n; i++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "library", b->libs[order[i]]);
                add_u64(x, "bytes", m->by_lib[order[i]]);
                cJSON_AddItemToArray(la, x);
            }
            add_u64(o, "torch_reserved", torch_reserved(b, v, m));
            cJSON_AddStringToObject(o, "torch_reserved_from",
                                    v->torch_segments_seen ? "segments" : "libc10_cuda");
            if (v->torch_blocks_seen)
                add_u64(o, "torch_allocated", m->torch_allocated);
            else
                cJSON_AddNullToObject(o, "torch_allocated");
            if (m->used_recorded) {
                char num[32];
                if (m->device_used >= m->recorded)
                    snprintf(num, sizeof num, "%" PRIu64, m->device_used - m->recorded);
                else
                    snprintf(num, sizeof num, "-%" PRIu64, m->recorded - m->device_used);
                cJSON_AddRawToObject(o, "unexplained", num);
            } else {
                cJSON_AddNullToObject(o, "unexplained");
            }
            cJSON_AddItemToArray(ra, o);
        }
        const char *layer;
        const bd_cats *k = cats_of(v, &layer);
        if (!v->seen || !k->total_peak)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "device", dn);
        cJSON_AddStringToObject(o, "layer", v->blocks_seen ? "blocks" : "driver");
        add_u64(o, "total_peak", k->total_peak);
        add_u64(o, "total_peak_t_ns", k->total_peak_t);
        if (k->oom_seen)
            add_u64(o, "oom_t_ns", k->oom_t);
        else
            cJSON_AddNullToObject(o, "oom_t_ns");
        cJSON *items = cJSON_AddArrayToObject(o, "items");
        for (int r = 0; r < cat_count(b->rules); r++) {
            int i = cat_row(b, r);
            if (!k->peak[i])
                continue;
            cJSON *x = cJSON_CreateObject();
            cJSON_AddStringToObject(x, "category", cat_name(b->rules, i));
            add_u64(x, "peak", k->peak[i]);
            add_u64(x, "at_total_peak", k->at_peak[i]);
            if (k->oom_seen)
                add_u64(x, "at_oom", k->at_oom[i]);
            else
                cJSON_AddNullToObject(x, "at_oom");
            cJSON_AddItemToArray(items, x);
        }
        cJSON_AddItemToArray(ca, o);
    }
}
