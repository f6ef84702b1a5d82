/* The findings model's getters (model.h and its parts): what the two
 * passes learnt, read-only, and the few settings a caller may change
 * between them (sm_set_x_range, sm_set_colour).
 */
#include "model_int.h"

#include <stdio.h>
#include <string.h>

#include "util/human.h"

const sm_opts *sm_options(const sm_model *m) { return &m->o; }
const sm_dev *sm_device(const sm_model *m, int slot) { return &m->dev[slot]; }
int sm_blocks_seen(const sm_model *m) { return m->blocks_seen; }
uint64_t sm_events(const sm_model *m) { return m->events; }
uint64_t sm_first_event_t(const sm_model *m) { return m->t_first; }
int sm_counters_seen(const sm_model *m) { return m->counters_seen; }
uint64_t sm_cap(const sm_model *m) { return m->o.cap ? m->o.cap : m->cap_header; }
int sm_ring_mode(const sm_model *m) { return !strcmp(m->mode, "ring"); }
uint64_t sm_truncated_after(const sm_model *m) { return m->f && m->f->truncated ? m->f->lines : 0; }
const sm_layout *sm_layout_at(const sm_model *m) { return &m->layout; }

const msnap_header *sm_header_info(const sm_model *m, char *mode, size_t len)
{
    snprintf(mode, len, "%s", m->mode);
    return &m->hdr;
}

const sm_site *sm_sites(const sm_model *m, size_t *n)
{
    *n = m->nsites;
    return m->sites;
}

int sm_capture_objects(const sm_model *m, msnap_obj **out, size_t *n, uint64_t *t_ns)
{
    uint64_t idx;
    if (!m->mk_capture) {
        *out = NULL;
        *n = 0;
        return -1;
    }
    return an_moment_objects(m->mk_capture, out, n, &idx, t_ns);
}

const sm_group *sm_groups(const sm_model *m, size_t *n)
{
    *n = m->ngroups;
    return m->groups;
}

const sm_leak *sm_leaks(const sm_model *m, size_t *n, uint64_t *nvalleys)
{
    *n = m->lf.nleaks;
    if (nvalleys)
        *nvalleys = m->lf.nvalleys;
    return m->lf.leaks;
}

void sm_floor(const sm_model *m, uint64_t *first, uint64_t *last)
{
    *first = m->lf.floor_first;
    *last = m->lf.floor_last;
}

const sm_oom *sm_ooms(const sm_model *m, size_t *n, uint64_t *total)
{
    *n = m->nooms;
    if (total)
        *total = m->total_ooms;
    return m->ooms;
}

const sm_range *sm_ranges(const sm_model *m, size_t *n, uint64_t *total)
{
    *n = m->nranges;
    if (total)
        *total = m->total_ranges;
    return m->ranges;
}

uint64_t sm_col_value(const sm_model *m, int slot, int col, int band)
{
    const sm_dev *v = &m->dev[slot];
    if (!v->colvals || col < 0 || col >= m->o.columns || band < 0 ||
        band > SM_MAX_TOP)
        return 0;
    return v->colvals[(size_t)col * (SM_MAX_TOP + 1) + band];
}

const char *sm_band_category(const sm_model *m, int slot, int band)
{
    if (m->o.by != SM_BY_CATEGORY || !m->bd || slot < 0 || slot >= SM_NDEV)
        return NULL;
    const sm_dev *v = &m->dev[slot];
    if (band < 0 || band > v->nbands)
        return NULL;
    return cat_name(m->o.rules ? m->o.rules : m->own_rules, v->band_cat[band]);
}

const struct breakdown *sm_breakdown(const sm_model *m)
{
    return m->bd;
}

const sm_symtab *sm_symtab_of(const sm_model *m) { return &m->f->tab; }
const sm_labels *sm_labels_of(const sm_model *m) { return an_labels(m->f); }
const an_file *sm_file(const sm_model *m) { return m->f; }

const char *sm_str(const sm_model *m, uint32_t id)
{
    return sm_symtab_str(&m->f->tab, id);
}

int sm_frame(const sm_model *m, uint32_t stack, int i, char *buf, size_t cap)
{
    return sm_symtab_frame(&m->f->tab, stack, i, SM_MOD_SIZED, buf, cap);
}

int sm_frame_get(const sm_model *m, uint32_t stack, int i, sm_frame_info *f)
{
    return sm_symtab_frame_get(&m->f->tab, stack, i, f);
}

void sm_peak_totals(const sm_model *m, uint64_t *stacked, uint64_t *reserved)
{
    *stacked = m->peak_stacked1;
    *reserved = m->peak_reserved1;
}

void sm_set_colour(sm_model *m, int slot, int rank, uint32_t rgb)
{
    if (slot < 0 || slot >= SM_NDEV || rank < 0 || rank >= SM_MAX_TOP)
        return;
    m->dev[slot].colour[rank] = rgb;
    m->dev[slot].colour_set[rank] = 1;
}

int sm_parse_at(const char *s, int *at, uint64_t *t_ns)
{
    *t_ns = 0;
    if (!strcmp(s, "oom")) { *at = SM_AT_OOM; return 0; }
    if (!strcmp(s, "peak")) { *at = SM_AT_PEAK; return 0; }
    if (!strcmp(s, "end")) { *at = SM_AT_END; return 0; }
    if (msnap_time_parse(s, t_ns))
        return -1;
    *at = SM_AT_TIME;
    return 0;
}
