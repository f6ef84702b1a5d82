/* Reconciliation with the driver's used figure, by library, and memory by
 * category (breakdown.h has the definitions): an observer of the one read
 * (analysis.h) that decides at the end, when the tables are complete (sym
 * lines may come last), what each site's memory is, and then replays the
 * file's change log through running totals per device.  What is live, and
 * what a refused free or a ring dump's state section does, is the state
 * model's: the log carries its changes.
 *
 * The moments (peak of recorded memory, highest device_used, total peak of
 * the categories, first OOM) are copies of the running totals taken as the
 * replay reaches them.  Library and category are computed once per stack.
 */
#include "breakdown.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "human.h"
#include "u64map.h"

/* What a site's memory is, decided at the end. */
typedef struct site_info {
    int lib, cat;
    uint8_t use;        /* 0 no part, 1 driver memory, 2 allocator block */
    uint8_t bview;      /* counts in the categories' blocks view */
    uint8_t kind;       /* cat_torch_kind of its stack (blocks) */
    uint8_t fixed;      /* cat decided by the frames alone (a user rule, ...) */
} site_info;

/* What became of one block (the first replay), by allocation ordinal. */
enum { FATE_KEPT = 0, FATE_SAME_PHASE = 1 };

/* A live driver-level range blocks may lie in (a segment, or a mapping
 * of a VMM handle), and the site of its memory. */
typedef struct range {
    uint64_t addr, size;
    uint32_t site;
} range;

struct breakdown {
    const cat_rules *rules;
    const an_file *f;
    /* during the read: the live ranges by address, and the sites whose
     * memory ever held an allocator block (an allocator's segments, whoever
     * made them: their blocks are counted instead) */
    range *ranges;
    size_t nranges, cap_ranges;
    uint8_t *holds_blocks;
    size_t cap_holds;
    int cur_kind;              /* phase of the last allocation replayed */
    uint64_t epoch;            /* changes of phase so far */
    /* following blocks through the replays: live key -> ordinal and epoch
     * (first), or -> category (second); fate by ordinal */
    u64map objs;
    uint8_t *fate;
    size_t nfate, cap_fate, ord;
    char libs[BD_MAX_LIBS][64];
    int nlibs;
    bd_device dev[BD_NDEV];
    u64map stack_class;        /* stack id -> lib | cat << 8 */
    site_info *sites;          /* per state site, during the replay */
    /* bd_keep_change_categories: one byte per change of the second replay,
     * in replay order (bd_change_categories) */
    int keep_changes;
    uint8_t *chg;
    size_t nchg, cap_chg;
    size_t changes;            /* changes the first replay met */
    uint64_t last_t;           /* largest event time replayed */
    uint64_t nevents;          /* events replayed */
    int err;
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
    u64map_free(&b->stack_class);
    u64map_free(&b->objs);
    free(b->ranges);
    free(b->holds_blocks);
    free(b->fate);
    free(b->sites);
    free(b->chg);
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
    uint64_t *v = u64map_get(&b->stack_class, 0, stack);
    if (v) {
        *lib = (int)(*v & 0xff);
        *cat = (int)(*v >> 8);
        return 0;
    }
    char name[256];
    *lib = lib_slot(b, cat_library_stack(&b->f->tab, stack, name, sizeof name));
    *cat = cat_classify_stack(b->rules, &b->f->tab, stack);
    return u64map_put(&b->stack_class, 0, stack, (uint64_t)*lib | ((uint64_t)*cat << 8));
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

/* What site i's memory is (the tables are complete).  -1 out of memory. */
static int site_classify(breakdown *b, uint32_t i, site_info *si)
{
    const msnap_site *s = &b->f->st.sites[i];
    memset(si, 0, sizeof *si);
    if (s->layer == MSNAP_LAYER_RESERVED)
        si->use = 1;
    else if (s->layer == MSNAP_LAYER_ALLOCATED)
        si->use = 2;
    else
        return 0;
    if (classify(b, s->stack, &si->lib, &si->cat))
        return -1;
    if (si->use == 2) {
        /* a block: which part of a PyTorch program made it; the category
         * waits for how it lived, unless the user's rules say */
        cat_frame fr[MSNAP_MAX_FRAMES];
        int n = cat_frames_of(&b->f->tab, s->stack, fr, MSNAP_MAX_FRAMES);
        const char *node;
        si->kind = (uint8_t)cat_torch_kind(fr, n, &node);
        int user = cat_classify_user(b->rules, fr, n);
        const char *rc = cat_name(b->rules, si->cat);
        si->fixed = 1;
        if (user >= 0)
            si->cat = user;
        else if (si->kind == CT_KV)
            si->cat = cat_index_of(b->rules, "kv_cache");
        else if (!strcmp(rc, "kv_cache") || !strcmp(rc, "workspaces") ||
                 !strcmp(rc, "communication") || !strcmp(rc, "parameters") ||
                 !strcmp(rc, "gradients"))
            ;   /* what the frames say outright (the default rules) */
        else if (si->kind == CT_INIT)
            si->cat = cat_index_of(b->rules, "parameters");
        else if (si->kind == CT_OTHER)
            si->cat = cat_index_of(b->rules, "inputs");
        else if (node && !strcmp(node, "AccumulateGrad"))
            si->cat = cat_index_of(b->rules, "gradients");
        else if (si->kind != CT_NONE)
            si->fixed = 0;      /* how its blocks live decides */
    }
    const char *ln = b->libs[si->lib];
    /* Driver memory of an unknown library is left out of the blocks view
     * too: without frames it cannot be told from an allocator's segment. */
    int container = i < b->cap_holds && b->holds_blocks[i];
    si->bview = si->use == 2 ||
                (!container && strcmp(ln, CAT_LIB_TORCH) != 0 &&
                 strcmp(ln, CAT_LIB_MEMSNAP) != 0 && strcmp(ln, CAT_LIB_UNKNOWN) != 0);
    return 0;
}

/* ---- the replay ------------------------------------------------------------ */

static void rp_event(void *ctx, uint64_t idx, uint64_t t)
{
    breakdown *b = ctx;
    b->nevents = idx;
    if (t > b->last_t)
        b->last_t = t;
}

/* The category of a block: its site's, or, when that waits on how the
 * block lived, the part of the program that made it and whether the
 * block outlived that part (a backward's gradients, an optimizer's state,
 * a forward's activations; else temporaries). */
static int block_category(const breakdown *b, const site_info *si, int fate)
{
    int kept = fate != FATE_SAME_PHASE;
    switch (si->fixed ? CT_NONE : si->kind) {
    case CT_BACKWARD:
        return cat_index_of(b->rules, kept ? "gradients" : "temporaries");
    case CT_OPTIM:
        return cat_index_of(b->rules, kept ? "optimizer_state" : "temporaries");
    case CT_FORWARD:
        return cat_index_of(b->rules, kept ? "activations" : "temporaries");
    default:
        return si->cat;
    }
}

/* Keeps the byte of the change the second replay is at (the array was
 * sized by the first replay, which met the same changes). */
static void keep_change(breakdown *b, uint8_t c)
{
    if (b->chg && b->nchg < b->cap_chg)
        b->chg[b->nchg++] = c;
}

static void rp_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                        uint64_t key)
{
    breakdown *b = ctx;
    const site_info *si = &b->sites[site];
    if (!si->use) {
        keep_change(b, BD_NOT_COUNTED);
        return;
    }
    int cat = si->cat;
    if (si->use == 2 && si->kind && !si->fixed) {
        /* a block followed: its category from its fate (first replay) */
        uint64_t v;
        if (sign > 0) {
            size_t o = b->ord++;
            cat = block_category(b, si, o < b->nfate ? b->fate[o] : FATE_KEPT);
            if (u64map_put(&b->objs, 2, key, (uint64_t)cat))
                b->err = 1;
        } else if (u64map_del(&b->objs, 2, key, &v)) {
            cat = (int)v;
        }
    }
    bd_device *v = &b->dev[b->f->st.sites[site].device];
    uint64_t t = b->last_t;
    v->seen = 1;
#define ADJ(x) ((x) = sign > 0 ? (x) + n : (x) - (n < (x) ? n : (x)))
    if (si->use == 2) {
        v->blocks_seen = 1;
        if (torch) {
            v->torch_blocks_seen = 1;
            ADJ(v->torch_blk);
        }
    } else {
        ADJ(v->recorded);
        ADJ(v->by_lib[si->lib]);
        cats_change(&v->driver_view, cat, n, sign, t);
        if (sign > 0 && v->recorded > v->at_peak.recorded)
            take_moment(v, &v->at_peak, t);
    }
#undef ADJ
    if (si->bview)
        cats_change(&v->blocks_view, cat, n, sign, t);
    /* the view summary shows for the device (bd_cats_shown): blocks_seen
     * is final here, the first replay set it */
    keep_change(b, (v->blocks_seen ? si->bview : si->use == 1) ? (uint8_t)cat
                                                              : BD_NOT_COUNTED);
}

/* A counters record: the moment of the highest device_used so far.  Only
 * records after the events they describe count: in a ring dump the series
 * comes before the events, and only the last line follows them. */
static void rp_counters(void *ctx, const msnap_counters *c)
{
    breakdown *b = ctx;
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

static void rp_segment(void *ctx, int device, int sign, uint64_t n)
{
    breakdown *b = ctx;
    bd_device *v = &b->dev[msnap_st_slot(device)];
    v->seen = 1;
    v->torch_segments_seen = 1;
    if (sign > 0)
        v->torch_seg += n;
    else
        v->torch_seg -= n < v->torch_seg ? n : v->torch_seg;
}

static void rp_oom(void *ctx, int device)
{
    breakdown *b = ctx;
    bd_device *v = &b->dev[msnap_st_slot(device)];
    bd_cats *views[2] = {&v->blocks_view, &v->driver_view};
    for (int i = 0; i < 2; i++)
        if (!views[i]->oom_seen) {
            views[i]->oom_seen = 1;
            views[i]->oom_t = b->last_t;
            memcpy(views[i]->at_oom, views[i]->cur, sizeof views[i]->at_oom);
        }
}

/* The first replay: what became of each block of a site whose category
 * waits on it.  The phase is the kind of the last allocation (a free
 * names no stack); a new phase starts an epoch; a block freed in its own
 * epoch lived within its phase. */
static void life_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                        uint64_t key)
{
    (void)torch;
    (void)n;
    breakdown *b = ctx;
    const site_info *si = &b->sites[site];
    b->changes++;
    if (si->use == 2)   /* which view each device shows, before the second replay */
        b->dev[b->f->st.sites[site].device].blocks_seen = 1;
    if (si->use != 2 || !si->kind || si->fixed)
        return;
    uint64_t v;
    if (sign > 0) {
        int k = si->kind == CT_KV ? CT_FORWARD : si->kind;
        if (k != b->cur_kind) {
            b->cur_kind = k;
            b->epoch++;
        }
        size_t o = b->ord++;
        if (sm_grow((void **)&b->fate, &b->cap_fate, o, 1) ||
            u64map_put(&b->objs, 2, key, (uint64_t)o | b->epoch << 32)) {
            b->err = 1;
            return;
        }
        b->fate[o] = FATE_KEPT;
        b->nfate = o + 1;
    } else if (u64map_del(&b->objs, 2, key, &v)) {
        if (v >> 32 == (b->epoch & 0xffffffffu))
            b->fate[v & 0xffffffffu] = FATE_SAME_PHASE;
    }
}

/* The end of the read: classify every site, then replay. */
static int on_end(void *ctx, an_file *f)
{
    breakdown *b = ctx;
    b->sites = calloc(f->st.nsites + 1, sizeof *b->sites);
    if (!b->sites)
        return -1;
    for (size_t i = 0; i < f->st.nsites; i++)
        if (site_classify(b, (uint32_t)i, &b->sites[i]))
            return -1;
    an_visitor life = {.ctx = b, .change = life_change};
    if (an_replay(f, &life) || b->err)
        return -1;
    u64map_free(&b->objs);
    b->ord = 0;
    if (b->keep_changes) {
        b->cap_chg = b->changes;
        if (!(b->chg = malloc(b->changes + 1)))
            return -1;
    }
    an_visitor v = {.ctx = b, .event = rp_event, .change = rp_change,
                    .counters = rp_counters, .segment = rp_segment, .oom = rp_oom};
    int rc = an_replay(f, &v) || b->err ? -1 : 0;
    u64map_free(&b->objs);
    return rc;
}

/* The index of the first range at or above addr. */
static size_t range_lb(const breakdown *b, uint64_t addr)
{
    size_t lo = 0, hi = b->nranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->ranges[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* During the read: keeps the live ranges; a new block marks the site of
 * the range it lies in. */
static int on_change(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    breakdown *b = ctx;
    if (o->kind == MSNAP_A_BLOCK_ALLOC) {
        if (sign < 0)
            return 0;
        size_t i = range_lb(b, o->addr + 1);
        if (i && o->addr < b->ranges[i - 1].addr + b->ranges[i - 1].size) {
            uint32_t site = b->ranges[i - 1].site;
            if (site != MSNAP_NO_SITE) {
                size_t had = b->cap_holds;
                if (sm_grow((void **)&b->holds_blocks, &b->cap_holds, site, 1))
                    return -1;
                memset(b->holds_blocks + had, 0, b->cap_holds - had);
                b->holds_blocks[site] = 1;
            }
        }
        return 0;
    }
    int mem = o->kind == MSNAP_A_ALLOC || o->kind == MSNAP_A_ASYNC_ALLOC ||
              o->kind == MSNAP_A_MANAGED_ALLOC;
    if (!mem && o->kind != MSNAP_A_VMM_MAP)
        return 0;
    size_t i = range_lb(b, o->addr);
    if (sign < 0) {
        while (i < b->nranges && b->ranges[i].addr == o->addr && b->ranges[i].size != o->size)
            i++;
        if (i < b->nranges && b->ranges[i].addr == o->addr) {
            memmove(&b->ranges[i], &b->ranges[i + 1], (b->nranges - i - 1) * sizeof *b->ranges);
            b->nranges--;
        }
        return 0;
    }
    uint32_t site = o->site;
    if (!mem) {
        /* a mapping's memory is its handle's */
        const msnap_obj *h = msnap_state_find(&f->st, MSNAP_SP_PHYS, o->aux);
        site = h ? h->site : MSNAP_NO_SITE;
    }
    if (sm_grow((void **)&b->ranges, &b->cap_ranges, b->nranges, sizeof *b->ranges))
        return -1;
    memmove(&b->ranges[i + 1], &b->ranges[i], (b->nranges - i) * sizeof *b->ranges);
    b->ranges[i] = (range){o->addr, o->size, site};
    b->nranges++;
    return 0;
}

void bd_keep_change_categories(breakdown *b)
{
    b->keep_changes = 1;
}

const uint8_t *bd_change_categories(const breakdown *b, size_t *n)
{
    *n = b->nchg;
    return b->chg;
}

int bd_attach(breakdown *b, an_file *f)
{
    b->f = f;
    static const an_observer obs = {NULL, NULL, NULL, NULL, on_change, on_end};
    an_observer o = obs;
    o.ctx = b;
    return an_want_log(f) || an_observe(f, &o) ? -1 : 0;
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

/* The PyTorch allocator's driver memory at a moment. */
static uint64_t torch_driver(const breakdown *b, const bd_moment *m)
{
    for (int i = 0; i < b->nlibs; i++)
        if (strcmp(b->libs[i], CAT_LIB_TORCH) == 0)
            return m->by_lib[i];
    return 0;
}

/* Whether PyTorch reserved at a moment comes from its segment events: at an
 * NVML sample (a quiet moment), when the file has them.  At the peak of
 * recorded memory, the moment right after a driver allocation, PyTorch's
 * record of the new segment comes an event later: its driver memory then,
 * so that the two lines of the table agree. */
static int torch_from_segments(const breakdown *b, const bd_device *v, const bd_moment *m)
{
    return v->torch_segments_seen && (m == &v->at_used || !torch_driver(b, m));
}

/* PyTorch reserved at a moment (torch_from_segments says from what). */
static uint64_t torch_reserved(const breakdown *b, const bd_device *v,
                               const bd_moment *m)
{
    return torch_from_segments(b, v, m) ? m->torch_reserved : torch_driver(b, m);
}

/* Whether PyTorch's allocator is seen on a device at all: its segment or
 * block events, or driver memory from libc10_cuda. */
static int uses_torch(const breakdown *b, const bd_device *v)
{
    if (v->torch_segments_seen || v->torch_blocks_seen)
        return 1;
    for (int i = 0; i < b->nlibs; i++)
        if (!strcmp(b->libs[i], CAT_LIB_TORCH) &&
            (v->at_peak.by_lib[i] || v->at_used.by_lib[i]))
            return 1;
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

const bd_cats *bd_cats_shown(const breakdown *b, int dev, const char **layer)
{
    const char *name;
    if (dev < 0 || dev >= BD_NDEV)
        return NULL;
    const bd_cats *k = cats_of(&b->dev[dev], &name);
    if (layer)
        *layer = name;
    return k;
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
               m->used_recorded ? "the counters sample with the highest device used"
                                : "the peak of recorded memory",
               msnap_time_text(m->t, t, sizeof t));
        if (m->used_recorded && v->at_peak.valid && v->at_peak.recorded > m->recorded)
            printf("  (recorded memory peaked between samples: %s at %s)\n",
                   msnap_size_text(v->at_peak.recorded, a, sizeof a),
                   msnap_time_text(v->at_peak.t, c, sizeof c));
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
        if (uses_torch(b, v)) {
            printf("  PyTorch reserved              %s%s\n",
                   msnap_size_text(torch_reserved(b, v, m), a, sizeof a),
                   torch_from_segments(b, v, m) ? " (its segment events)"
                                                : " (driver memory from libc10_cuda)");
            if (v->torch_blocks_seen)
                printf("  PyTorch allocated             %s\n",
                       msnap_size_text(m->torch_allocated, a, sizeof a));
            else
                printf("  PyTorch allocated             n/a (no torch block "
                       "events)\n");
        }
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
            /* the text's "(recorded memory peaked between samples: X at T)" */
            if (m->used_recorded && v->at_peak.valid && v->at_peak.recorded > m->recorded) {
                cJSON *pk = cJSON_AddObjectToObject(o, "recorded_peak");
                add_u64(pk, "bytes", v->at_peak.recorded);
                add_u64(pk, "t_ns", v->at_peak.t);
            } else {
                cJSON_AddNullToObject(o, "recorded_peak");
            }
            cJSON *la = cJSON_AddArrayToObject(o, "libraries");
            int order[BD_MAX_LIBS];
            int n = libs_sorted(b, m, order);
            for (int i = 0; i < n; i++) {
                cJSON *x = cJSON_CreateObject();
                cJSON_AddStringToObject(x, "library", b->libs[order[i]]);
                add_u64(x, "bytes", m->by_lib[order[i]]);
                cJSON_AddItemToArray(la, x);
            }
            if (uses_torch(b, v)) {
                add_u64(o, "torch_reserved", torch_reserved(b, v, m));
                cJSON_AddStringToObject(o, "torch_reserved_from",
                                        torch_from_segments(b, v, m) ? "segments"
                                                                     : "libc10_cuda");
            } else {
                cJSON_AddNullToObject(o, "torch_reserved");
                cJSON_AddNullToObject(o, "torch_reserved_from");
            }
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
