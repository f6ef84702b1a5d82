/* The findings model's insides, shared by its files (not installed, not for
 * other modules: they use model.h).  The model is split along its seams:
 *
 *   model.c          pass 1 and the model's life: the observer of the read
 *                    (records, events before and after the state, changes
 *                    of live memory and the peaks), the OOMs, the capture
 *                    moment, the end of pass 1 (on_end), sm_attach and
 *                    sm_read_file;
 *   model_axis.c     the x axis: time, events, or the marks axis (marks read
 *                    in pass 1, anchors after it, x of an event), the
 *                    columns of an x;
 *   model_layout.c   the segment layout at one moment (segments, spans of
 *                    blocks, free, used and unmapped memory);
 *   model_groups.c   the site groups (the sites whose labels read the same,
 *                    label.h) with their figures over time, and the top
 *                    groups per device;
 *   model_columns.c  pass 2: the log replayed into the timeline's columns and
 *                    bands (by site or by category), the NVTX ranges;
 *   model_get.c      the getters of model.h and its parts.
 *
 * Functions one file gives another are named sm__*.
 */
#ifndef MEMSNAP_ANALYZE_MODEL_INT_H
#define MEMSNAP_ANALYZE_MODEL_INT_H

#include "model.h"

#include "analysis.h"
#include "breakdown.h"
#include "category.h"
#include "findings.h"
#include "format/state.h"

#define NO_SITE MSNAP_NO_SITE
#define MAX_THREADS 64
#define MAX_DEPTH 32

typedef struct sm_thread {
    uint32_t tid;
    int depth;
    uint64_t x0[MAX_DEPTH];
    uint32_t str[MAX_DEPTH];
} sm_thread;

struct sm_model {
    sm_opts o;
    int pass;

    /* header */
    int have_header;
    char mode[16];
    msnap_header hdr;            /* copied scalars; argv/settings not kept */
    uint64_t cap_header;

    sm_dev dev[SM_NDEV];

    /* the input: its tables, state (live objects, levels, sites) and log
     * (analysis.h); own is used when the model reads a file itself */
    an_file *f;
    an_file own;
    int owns;
    int err;                     /* an observer ran out of memory */

    /* by category (model_columns.h "Bands"): the breakdown observing the same read
     * (after the model), its rules, and pass 2's place in its bytes */
    breakdown *bd;
    cat_rules *own_rules;        /* when opts.rules is NULL */
    const uint8_t *chg_cat;
    size_t nchg_cat, chg;
    int8_t cat_band[SM_NDEV][CAT_MAX];   /* category -> band, -1 = the rest */
    size_t oom_cur;              /* pass 2: the next OOM whose level is taken */
    /* by pool (model_columns.h "Bands"): per device slot and pool index
     * (0 the default pool), its band (-1 the rest; a private pool's cache
     * is the band after), its reserved and allocated bytes in pass 2 */
    int16_t *pool_band;          /* [SM_NDEV * (npools + 1)] */
    uint64_t *pool_res, *pool_alc;
    uint32_t pool_n;             /* npools + 1 */
    uint32_t band_pool[SM_NDEV][SM_MAX_TOP + 1]; /* band -> pool index */
    uint8_t band_cached[SM_NDEV][SM_MAX_TOP + 1]; /* band is a pool's cache */

    /* the state's sites with the model's figures; nsites <= st.nsites */
    sm_site *sites;
    size_t nsites, cap_sites;
    sm_group *groups;            /* sites by label (sm_groups), after the read */
    size_t ngroups;

    /* progress */
    uint64_t events, ev_idx, t_max, t_first;
    int have_first;
    uint64_t t_first_cnt;        /* t of the earliest counters line */
    int have_first_cnt;
    int blocks_seen;             /* pass 1: seen so far; pass 2: final */
    int counters_seen;
    uint64_t cur_x;              /* x of the current event (pass 2) */
    int cur_col;

    /* the capture moment: the live set at the process's latest new peak
     * of reserved, at the first OOM, or after the last event at or before
     * --at TIME (analysis.h moments), kept as the read passes them */
    an_moment *mk_peak, *mk_oom, *mk_time, *mk_end;
    int peak_pending;            /* mk_peak was marked at a new peak of
                                    reserved: the first block inside the new
                                    memory joins it (model.c) */
    uint64_t pend_reserved;      /* reserved at the mark */
    uint64_t pend_lo, pend_hi;   /* the new memory; pend_hi 0: not known yet */
    an_moment *mk_capture;       /* the one the layout was taken at */
    uint64_t peak_idx;
    uint64_t peak_reserved1, peak_stacked1; /* the process's peaks after pass 1
                                               (state.h, counters included),
                                               as `memsnap summary` reads them */
    int capture_at;
    sm_layout layout;

    /* OOMs */
    sm_oom ooms[SM_MAX_OOMS];
    size_t nooms;
    uint64_t total_ooms, first_oom_idx;

    sm_leakfinder lf;            /* findings.h; lf.T = the stacked total */

    /* NVTX (pass 2) */
    sm_thread threads[MAX_THREADS];
    int nthreads;
    uint32_t main_tid;
    int have_main;
    sm_range *ranges;
    size_t nranges;
    uint64_t total_ranges;

    /* marks axis: (event index, mark string) in pass 1, then the anchors
     * (event index, value in x units), non-decreasing in both */
    uint64_t *mark_ev, *mark_t;
    uint32_t *mark_str;
    size_t nmark_raw, cap_mark_ev, cap_mark_t, cap_mark_str;
    /* SM_X_AUTO (model_axis.c): pass 1's events per stretch of time, the
     * stretches doubling as the run goes on */
#define SM_TBINS 512
    uint64_t tbin[SM_TBINS];
    uint64_t tbin_w;             /* ns per stretch (0: no event yet) */
    int x_auto;                  /* the axis was chosen (sm_x_auto) */
    double x_auto_ev, x_auto_time;
    uint64_t x_auto_lo, x_auto_hi;
    uint64_t *anc_ev, *anc_x;
    size_t nanc;
    size_t nmarks;               /* marks read (the implicit origin not counted) */
    char mark_word[32];
    int x_override;
    uint64_t x_lo, x_hi;
    size_t anc_cur;              /* pass 2 cursor into the anchors */
};

/* ---- small helpers ---------------------------------------------------- */

static inline int dev_slot(int d)
{
    return d >= 0 && d < MSNAP_MAX_DEVICES ? d : SM_DEV_UNKNOWN;
}

/* Site class of an allocation kind on a device slot. */
static inline int cls_of(int kind, int slot)
{
    switch (msnap_state_site_layer(kind, slot)) {
    case MSNAP_LAYER_RESERVED: return SM_CLS_MEM;
    case MSNAP_LAYER_ALLOCATED: return SM_CLS_BLOCK;
    default: return SM_CLS_NONE;
    }
}

static inline int stacked_cls(const sm_model *m)
{
    return m->blocks_seen ? SM_CLS_BLOCK : SM_CLS_MEM;
}

/* model.c */
/* The model's entry for the state's site idx, made when new (the state's
 * sites only grow).  NULL when out of memory. */
sm_site *sm__site_at(sm_model *m, uint32_t idx);

/* model_axis.c */
/* Pass 1: a mark at event idx with text str.  0 ok, -1 out of memory. */
int sm__mark_add(sm_model *m, uint64_t idx, uint64_t t_ns, uint32_t str);
/* Pass 1: an event at t_ns in the time histogram of SM_X_AUTO. */
void sm__time_note(sm_model *m, uint64_t t_ns);
/* End of pass 1: resolves SM_X_AUTO. */
void sm__x_choose(sm_model *m);
/* After pass 1: the marks axis's anchors.  0 ok, -1 out of memory. */
int sm__marks_finish(sm_model *m);
/* x of event idx on the marks axis; cur: a cursor for calls in order (or
 * NULL). */
uint64_t sm__marks_x_at(const sm_model *m, uint64_t idx, size_t *cur);

/* model_layout.c */
/* The layout of the live objects objs[0..n) after event ev_idx at t_ns
 * into *l.  0 ok, -1 out of memory (*l empty). */
int sm__layout_build(sm_model *m, const msnap_obj *objs, size_t n, uint64_t ev_idx,
                     uint64_t t_ns, sm_layout *l);
void sm__layout_free(sm_layout *l);

/* model_groups.c */
/* The sites grouped by label, layer and device, with their figures.
 * 0 ok, -1 out of memory. */
int sm__build_groups(sm_model *m);
/* Then the top groups per device by peak, their ranks given to their
 * sites.  0 ok, -1 out of memory. */
int sm__rank_groups(sm_model *m);

#endif
