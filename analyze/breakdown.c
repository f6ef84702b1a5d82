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

#include "rangemap.h"
#include "util/human.h"
#include "util/u64map.h"

/* A block kind beside category.h's CT_*: a reduce-scatter's buffer, whose
 * category its fate decides (block_category). */
enum { CT_REDUCE = CT_OTHER + 1 };

/* What a site's memory is, decided at the end. */
typedef struct site_info {
    int lib, cat;
    uint8_t use;        /* 0 no part, 1 driver memory, 2 allocator block */
    uint8_t bview;      /* counts in the categories' blocks view */
    uint8_t kind;       /* cat_torch_kind of its stack (blocks) */
    uint8_t fixed;      /* cat decided by the frames alone (a user rule, ...) */
    uint8_t user;       /* ... by the user's rules */
    uint8_t outside;    /* driver memory outside an allocator: no block was
                           ever in it, and not an allocator's library */
} site_info;

/* What became of one block (the first replay), by allocation ordinal:
 * freed in the phase that made it (else kept); made before the first
 * step; still live at the end. */
enum { FATE_KEPT = 0, FATE_SAME_PHASE = 1, FATE_EARLY = 2, FATE_TO_END = 4 };

struct breakdown {
    const cat_rules *rules;
    const an_file *f;
    /* during the read: the live driver-level ranges blocks may lie in (a
     * segment, or a mapping of a VMM handle) by address, each with the
     * site of its memory (rangemap.h: O(log n) a change, where a sorted
     * array with a memmove per change was quadratic in the live set), and
     * the sites whose memory ever held an allocator block (an allocator's
     * segments, whoever made them: their blocks are counted instead) */
    rangemap ranges;
    uint8_t *holds_blocks;
    size_t cap_holds;
    int cur_kind;              /* phase of the last allocation replayed */
    uint64_t epoch;            /* changes of phase so far */
    int stepped;               /* the first step began (see life_change) */
    size_t last_step;          /* the change of the last step's block */
    /* blocks made before the first step and freed: ordinal and change, to
     * tell, once the last step is known, those freed after it (at the
     * program's teardown) from those freed before */
    struct early_free { size_t ord, at; } *early_freed;
    size_t nearly, cap_early;
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
    rangemap_free(&b->ranges);
    free(b->holds_blocks);
    free(b->fate);
    free(b->early_freed);
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
    m->outside = v->outside;
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

/* A block's site: which part of a PyTorch program made it (si->kind); its
 * category (si->cat, the rules' on entry) waits for how it lived
 * (si->fixed 0), unless the user's rules or the frames say outright. */
static void block_class(const cat_rules *rules, const sm_symtab *t, uint32_t stack,
                        site_info *si)
{
    cat_frame fr[MSNAP_MAX_FRAMES];
    int n = cat_frames_of(t, stack, fr, MSNAP_MAX_FRAMES);
    const char *node;
    si->kind = (uint8_t)cat_torch_kind(fr, n, &node);
    int user = cat_classify_user(rules, fr, n);
    const char *rc = cat_name(rules, si->cat);
    si->fixed = 1;
    if (user >= 0)
        si->cat = user, si->user = 1;
    else if (si->kind == CT_KV)
        si->cat = cat_index_of(rules, "kv_cache");
    else if (!strcmp(rc, "kv_cache") || !strcmp(rc, "workspaces") ||
             !strcmp(rc, "communication") || !strcmp(rc, "parameters") ||
             !strcmp(rc, "gradients") || !strcmp(rc, "all_gather"))
        ;   /* what the frames say outright (the default rules) */
    else if (!strcmp(rc, "reduce_scatter")) {
        /* FSDP's reduced shard becomes .grad: kept past the backward, a
         * gradient; freed within it, the collective's buffer */
        si->kind = CT_REDUCE;
        si->fixed = 0;
    } else if (si->kind == CT_INIT)
        si->cat = cat_index_of(rules, "parameters");
    else if (si->kind == CT_OTHER)
        /* the program's own code around the model: inputs, or parameters
         * made before the first step (block_category) */
        si->cat = cat_index_of(rules, "inputs"), si->fixed = 0;
    else if (node && !strcmp(node, "AccumulateGrad"))
        si->cat = cat_index_of(rules, "gradients");
    else if (si->kind != CT_NONE)
        si->fixed = 0;      /* how its blocks live decides */
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
    if (si->use == 2)
        block_class(b->rules, &b->f->tab, s->stack, si);
    const char *ln = b->libs[si->lib];
    /* Driver memory of an unknown library is left out of the blocks view
     * too: without frames it cannot be told from an allocator's segment. */
    int container = i < b->cap_holds && b->holds_blocks[i];
    si->bview = si->use == 2 ||
                (!container && strcmp(ln, CAT_LIB_TORCH) != 0 &&
                 strcmp(ln, CAT_LIB_MEMSNAP) != 0 && strcmp(ln, CAT_LIB_UNKNOWN) != 0);
    si->outside = si->use == 1 && !container && strcmp(ln, CAT_LIB_TORCH) != 0 &&
                  strcmp(ln, CAT_LIB_MEMSNAP) != 0;
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
 * a forward's activations; else temporaries; a reduce-scatter's, part of
 * the backward: gradients, else reduce_scatter). */
static int block_category(const breakdown *b, const site_info *si, int fate)
{
    int kept = !(fate & FATE_SAME_PHASE);
    switch (si->fixed ? CT_NONE : si->kind) {
    case CT_REDUCE:
        return cat_index_of(b->rules, kept ? "gradients" : "reduce_scatter");
    case CT_OTHER:
        /* weights made as plain tensors (no nn.Module): made before the
         * first step, alive after the last (the file's end is often after
         * the interpreter's teardown, which frees them) */
        return b->stepped && (fate & FATE_EARLY) && (fate & FATE_TO_END)
                   ? cat_index_of(b->rules, "parameters") : si->cat;
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

int bd_live_category(const cat_rules *rules, const sm_symtab *t, uint32_t stack, int block)
{
    site_info si = {.cat = cat_classify_stack(rules, t, stack)};
    if (!block)
        return si.cat;
    block_class(rules, t, stack, &si);
    breakdown b = {.rules = rules};
    return block_category(&b, &si, FATE_KEPT);
}

/* Keeps the byte of the change the second replay is at (the array was
 * sized by the first replay, which met the same changes). */
static void keep_change(breakdown *b, uint8_t c)
{
    if (b->chg && b->nchg < b->cap_chg)
        b->chg[b->nchg++] = c;
}

static void rp_change(void *ctx, uint32_t site, int sign, uint64_t n, int torch,
                      uint64_t key, uint32_t pool)
{
    breakdown *b = ctx;
    const site_info *si = &b->sites[site];
    if (!si->use) {
        keep_change(b, BD_NOT_COUNTED);
        return;
    }
    int cat = si->cat;
    if (si->use == 2 && pool && !si->user && an_pool_kind(b->f, pool) == AN_POOL_GRAPH) {
        /* a CUDA graph's pool: what its captures hold, whatever made it
         * (a user's rule still says otherwise) */
        cat = cat_index_of(b->rules, "graph_pool");
    } else if (si->use == 2 && si->kind && !si->fixed) {
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
        if (si->outside)
            ADJ(v->outside);
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
                        uint64_t key, uint32_t pool)
{
    (void)torch;
    (void)n;
    breakdown *b = ctx;
    const site_info *si = &b->sites[site];
    b->changes++;
    if (si->use == 2)   /* which view each device shows, before the second replay */
        b->dev[b->f->st.sites[site].device].blocks_seen = 1;
    /* the first step: the first block of a model's forward, a backward, an
     * optimizer, a KV cache or a private pool (a graph's capture) */
    if (si->use == 2 && sign > 0 &&
        (pool || si->kind == CT_FORWARD || si->kind == CT_BACKWARD || si->kind == CT_OPTIM ||
         si->kind == CT_KV)) {
        b->stepped = 1;
        b->last_step = b->changes;
    }
    if (si->use != 2 || !si->kind || si->fixed)
        return;
    uint64_t v;
    if (sign > 0) {
        int k = si->kind == CT_KV ? CT_FORWARD : si->kind == CT_REDUCE ? CT_BACKWARD : si->kind;
        if (k != b->cur_kind && k != CT_OTHER) {
            /* the program's own code between the phases starts none */
            b->cur_kind = k;
            b->epoch++;
        }
        size_t o = b->ord++;
        if (msnap_grow((void **)&b->fate, &b->cap_fate, o, 1) ||
            u64map_put(&b->objs, 2, key, (uint64_t)o | b->epoch << 32)) {
            b->err = 1;
            return;
        }
        b->fate[o] = (uint8_t)(FATE_KEPT | (b->stepped ? 0 : FATE_EARLY));
        b->nfate = o + 1;
    } else if (u64map_del(&b->objs, 2, key, &v)) {
        size_t o = v & 0xffffffffu;
        if (v >> 32 == (b->epoch & 0xffffffffu) && si->kind != CT_OTHER)
            b->fate[o] |= FATE_SAME_PHASE;
        if (b->fate[o] & FATE_EARLY) {
            if (msnap_grow((void **)&b->early_freed, &b->cap_early, b->nearly,
                           sizeof *b->early_freed)) {
                b->err = 1;
                return;
            }
            b->early_freed[b->nearly++] = (struct early_free){o, b->changes};
        }
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
    an_visitor life = {.ctx = b, .pchange = life_change};
    if (an_replay(f, &life) || b->err)
        return -1;
    /* what is still live at the end, or was freed after the last step */
    for (size_t i = 0; i < b->objs.cap; i++)
        if (b->objs.slots && b->objs.slots[i].used) {
            uint64_t o = b->objs.slots[i].value & 0xffffffffu;
            if (o < b->nfate)
                b->fate[o] |= FATE_TO_END;
        }
    for (size_t i = 0; i < b->nearly; i++)
        if (b->early_freed[i].at > b->last_step && b->early_freed[i].ord < b->nfate)
            b->fate[b->early_freed[i].ord] |= FATE_TO_END;
    u64map_free(&b->objs);
    b->ord = 0;
    if (b->keep_changes) {
        b->cap_chg = b->changes;
        if (!(b->chg = malloc(b->changes + 1)))
            return -1;
    }
    an_visitor v = {.ctx = b, .event = rp_event, .pchange = rp_change,
                    .counters = rp_counters, .segment = rp_segment, .oom = rp_oom};
    int rc = an_replay(f, &v) || b->err ? -1 : 0;
    u64map_free(&b->objs);
    return rc;
}

/* During the read: keeps the live ranges; a new block marks the site of
 * the range it lies in. */
static int on_change(void *ctx, an_file *f, const msnap_obj *o, int sign)
{
    breakdown *b = ctx;
    if (o->kind == MSNAP_A_BLOCK_ALLOC) {
        if (sign < 0)
            return 0;
        const rm_node *r = rangemap_floor(&b->ranges, o->addr);
        if (r && o->addr < r->addr + r->size) {
            uint32_t site = (uint32_t)r->val;
            if (site != MSNAP_NO_SITE) {
                size_t had = b->cap_holds;
                if (msnap_grow((void **)&b->holds_blocks, &b->cap_holds, site, 1))
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
    if (sign < 0) {
        rangemap_remove(&b->ranges, o->addr, o->size);
        return 0;
    }
    uint32_t site = o->site;
    if (!mem) {
        /* a mapping's memory is its handle's */
        const msnap_obj *h = msnap_state_find(&f->st, MSNAP_SP_PHYS, o->aux);
        site = h ? h->site : MSNAP_NO_SITE;
    }
    return rangemap_insert(&b->ranges, o->addr, o->size, site);
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

int bd_outside(const breakdown *b, int dev, int blocks, uint64_t *context, uint64_t *libs)
{
    *context = *libs = 0;
    const bd_device *v = bd_device_of(b, dev);
    const bd_moment *m = v && v->seen ? moment_of(v) : NULL;
    if (!m)
        return 0;
    if (m->used_recorded && m->device_used > m->recorded)
        *context = m->device_used - m->recorded;
    if (blocks)
        *libs = m->outside;
    return m->used_recorded;
}
