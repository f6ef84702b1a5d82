/* The segment layout at one moment (model_layout.h): every segment (a
 * driver allocation, a VMM reservation) by device and address, cut into
 * spans: the allocator's blocks (by site), memory other libraries use
 * (cuBLAS, cuDNN, NCCL: never free), free memory (mapped, in no block) and
 * unmapped address space; and per device the totals and the largest free
 * span, from which findings.c reads fragmentation.
 */
#include "model_int.h"

#include <stdlib.h>
#include <string.h>

static int cmp_live_addr(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_addr_only(const void *a, const void *b)
{
    const msnap_obj *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Appends a span, merging with the previous one when both are free (or
 * both unmapped) and contiguous. */
static int span_push(sm_layout *l, size_t *cap, sm_segment *sg, uint64_t a,
                     uint64_t b, int what, uint32_t site)
{
    if (b <= a)
        return 0;
    if (sg->nspans) {
        sm_span *p = &l->spans[l->nspans - 1];
        if (p->what == what && p->addr + p->size == a &&
            (what == SM_SPAN_FREE || what == SM_SPAN_UNMAPPED)) {
            p->size += b - a;
            if (what == SM_SPAN_FREE && p->size > sg->largest_free)
                sg->largest_free = p->size;
            return 0;
        }
    }
    if (msnap_grow((void **)&l->spans, cap, l->nspans, sizeof *l->spans))
        return -1;
    l->spans[l->nspans++] = (sm_span){.addr = a, .size = b - a, .site = site,
                                      .what = (uint8_t)what};
    sg->nspans++;
    if (what == SM_SPAN_FREE && b - a > sg->largest_free)
        sg->largest_free = b - a;
    return 0;
}

/* First index in sorted arr[0..n) with addr >= a. */
static size_t lower_bound(const msnap_obj *arr, size_t n, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (arr[mid].addr < a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Fills the spans of [a, b) given the mapped intervals maps[0..nm) (sorted,
 * clamped by the caller) and the sorted blocks. */
/* Whether driver memory made with `stack` belongs to a library that uses it
 * itself (cuBLAS's workspaces, cuDNN, NCCL): with an allocator's blocks in
 * the file, such memory is neither the allocator's cache nor free. */
static int other_library(const sm_model *m, uint32_t stack)
{
    static const char *const libs[] = {"cuBLAS", "cuDNN", "NCCL"};
    char buf[128];
    if (!m->f || !stack)
        return 0;
    const char *lib = cat_library_stack(&m->f->tab, stack, buf, sizeof buf);
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++)
        if (!strcmp(lib, libs[i]))
            return 1;
    return 0;
}

static int fill_segment(sm_model *m, sm_layout *l, size_t *cap, sm_segment *sg,
                        const msnap_obj *maps, size_t nm, const msnap_obj *blocks,
                        size_t nb, int other)
{
    uint64_t a = sg->addr, b = sg->addr + sg->size, pos = a;
    size_t bi = lower_bound(blocks, nb, a);
    if (bi > 0 && blocks[bi - 1].addr + blocks[bi - 1].size > a)
        bi--;   /* a block that starts before the segment reaches into it */
    for (size_t i = 0; i < nm; i++) {
        uint64_t ma = maps[i].addr < a ? a : maps[i].addr;
        uint64_t mb = maps[i].addr + maps[i].size > b ? b
                                                      : maps[i].addr + maps[i].size;
        if (mb <= pos)
            continue;
        if (ma < pos)
            ma = pos;
        if (span_push(l, cap, sg, pos, ma, SM_SPAN_UNMAPPED, NO_SITE))
            return -1;
        pos = ma;
        if (m->blocks_seen && !other) {
            /* Blocks are sorted and do not overlap, so their ends are
             * sorted too.  A block may span several mappings (expandable
             * segments map 2 MiB pages): it fills its part of each, and
             * stays current for the next mapping. */
            while (bi < nb && blocks[bi].addr + blocks[bi].size <= ma)
                bi++;
            for (; bi < nb && blocks[bi].addr < mb; bi++) {
                uint64_t end = blocks[bi].addr + blocks[bi].size;
                uint64_t ba = blocks[bi].addr < pos ? pos : blocks[bi].addr;
                uint64_t be = end > mb ? mb : end;
                if (be > ba) {
                    if (span_push(l, cap, sg, pos, ba, SM_SPAN_FREE, NO_SITE) ||
                        span_push(l, cap, sg, ba, be, SM_SPAN_BLOCK,
                                  blocks[bi].site))
                        return -1;
                    pos = be;
                }
                if (end > mb)
                    break;
            }
            if (span_push(l, cap, sg, pos, mb, SM_SPAN_FREE, NO_SITE))
                return -1;
        } else {
            uint32_t site = maps[i].site;
            if (span_push(l, cap, sg, ma, mb, SM_SPAN_USED, site))
                return -1;
        }
        pos = mb;
    }
    return span_push(l, cap, sg, pos, b, SM_SPAN_UNMAPPED, NO_SITE);
}

/* Builds the layout of the live objects objs[0..n) (the moment after
 * event ev_idx, at x) into *l.  0 ok, -1 no memory. */
int sm__layout_build(sm_model *m, const msnap_obj *objs, size_t n, uint64_t ev_idx,
                        uint64_t t_ns, sm_layout *l)
{
    memset(l, 0, sizeof *l);
    size_t ns = 0, nb = 0, nm = 0;
    msnap_obj *segs = malloc((n + 1) * sizeof *segs);
    msnap_obj *blocks = malloc((n + 1) * sizeof *blocks);
    msnap_obj *maps = malloc((n + 1) * sizeof *maps);
    size_t cap_segs = 0, cap_spans = 0;
    u64map phys = {0};           /* cuMemCreate handle -> index into objs */
    int rc = -1;
    if (!segs || !blocks || !maps)
        goto out;
    for (size_t i = 0; i < n; i++)
        if (objs[i].space == MSNAP_SP_PHYS && u64map_put(&phys, 0, objs[i].aux, i))
            goto out;
    for (size_t i = 0; i < n; i++) {
        msnap_obj e = objs[i];
        switch (e.kind) {
        case MSNAP_A_ALLOC: case MSNAP_A_ASYNC_ALLOC: case MSNAP_A_MANAGED_ALLOC:
        case MSNAP_A_VMM_RESERVE:
            segs[ns++] = e;
            break;
        case MSNAP_A_BLOCK_ALLOC:
            blocks[nb++] = e;
            break;
        case MSNAP_A_VMM_MAP: {
            /* The site of a mapping is the site of its physical memory. */
            const uint64_t *hi = u64map_get(&phys, 0, e.aux);
            const msnap_obj *h = hi ? &objs[*hi] : NULL;
            e.site = h ? h->site : NO_SITE;
            if (h && e.device == SM_DEV_UNKNOWN)
                e.device = h->device;
            maps[nm++] = e;
            break;
        }
        default:
            break;
        }
    }
    qsort(blocks, nb, sizeof *blocks, cmp_addr_only);
    qsort(maps, nm, sizeof *maps, cmp_addr_only);
    /* A VA reservation on an unknown device takes its mappings' device. */
    for (size_t i = 0; i < ns; i++) {
        if (segs[i].kind != MSNAP_A_VMM_RESERVE || segs[i].device != SM_DEV_UNKNOWN)
            continue;
        size_t j = lower_bound(maps, nm, segs[i].addr);
        if (j < nm && maps[j].addr < segs[i].addr + segs[i].size)
            segs[i].device = maps[j].device;
        else {
            int only = -1, count = 0;
            for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
                if (m->dev[d].seen) {
                    only = d;
                    count++;
                }
            if (count == 1)
                segs[i].device = (int16_t)only;
        }
    }
    qsort(segs, ns, sizeof *segs, cmp_live_addr);
    for (size_t i = 0; i < ns; i++) {
        if (msnap_grow((void **)&l->segs, &cap_segs, l->nsegs, sizeof *l->segs))
            goto out;
        sm_segment *sg = &l->segs[l->nsegs++];
        *sg = (sm_segment){.addr = segs[i].addr, .size = segs[i].size,
                           .kind = segs[i].kind, .device = segs[i].device,
                           .site = segs[i].site, .first_span = l->nspans};
        int r, other = m->blocks_seen && other_library(m, segs[i].stack);
        if (segs[i].kind == MSNAP_A_VMM_RESERVE) {
            size_t j = lower_bound(maps, nm, segs[i].addr), k = j;
            while (k < nm && maps[k].addr < segs[i].addr + segs[i].size)
                k++;
            r = fill_segment(m, l, &cap_spans, sg, maps + j, k - j, blocks, nb, other);
        } else {
            msnap_obj whole = segs[i];
            r = fill_segment(m, l, &cap_spans, sg, &whole, 1, blocks, nb, other);
        }
        if (r)
            goto out;
        sm_dev_layout *dl = &l->dev[sg->device];
        dl->segments++;
        dl->segment_bytes += sg->size;
        for (size_t s = sg->first_span; s < sg->first_span + sg->nspans; s++) {
            const sm_span *sp = &l->spans[s];
            if (sp->what != SM_SPAN_UNMAPPED)
                dl->mapped_bytes += sp->size;
            if (sp->what == SM_SPAN_BLOCK)
                dl->block_bytes += sp->size;
            if (sp->what == SM_SPAN_USED && other)
                dl->other_bytes += sp->size;
            if (sp->what == SM_SPAN_FREE)
                dl->total_free += sp->size;
        }
        if (sg->largest_free > dl->largest_free)
            dl->largest_free = sg->largest_free;
    }
    /* Blocks outside every recorded segment: one extra row per device. */
    if (m->blocks_seen) {
        for (size_t i = 0; i < nb; i++) {
            size_t lo = 0, hi = ns;   /* last segment with addr <= block */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (cmp_live_addr(&segs[mid], &blocks[i]) <= 0)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int inside = 0;
            for (size_t j = lo; j-- > 0;) {
                if (segs[j].device != blocks[i].device)
                    break;
                if (blocks[i].addr < segs[j].addr + segs[j].size)
                    inside = 1;
                break;
            }
            if (inside)
                continue;
            int d = blocks[i].device;
            if (msnap_grow((void **)&l->segs, &cap_segs, l->nsegs, sizeof *l->segs))
                goto out;
            sm_segment *sg = &l->segs[l->nsegs++];
            *sg = (sm_segment){.addr = blocks[i].addr, .size = blocks[i].size,
                               .kind = 0, .device = (int16_t)d, .site = NO_SITE,
                               .first_span = l->nspans};
            if (span_push(l, &cap_spans, sg, blocks[i].addr,
                          blocks[i].addr + blocks[i].size, SM_SPAN_BLOCK,
                          blocks[i].site))
                goto out;
            l->dev[d].block_bytes += blocks[i].size;
        }
    }
    l->valid = 1;
    l->t_ns = t_ns; /* the time, whatever the x axis is (events, marks) */
    l->event_index = ev_idx;
    rc = 0;
out:
    free(segs);
    free(blocks);
    free(maps);
    u64map_free(&phys);
    if (rc)
        sm__layout_free(l);
    return rc;
}

void sm__layout_free(sm_layout *l)
{
    free(l->segs);
    free(l->spans);
    memset(l, 0, sizeof *l);
}

int sm_layout_of(sm_model *m, int blocks, const msnap_obj *objs, size_t n, uint64_t ev_idx,
                 uint64_t t_ns, sm_layout *l)
{
    /* the build reads the model (blocks seen, devices, tables) */
    int seen = m->blocks_seen;
    m->blocks_seen = blocks;
    int rc = sm__layout_build(m, objs, n, ev_idx, t_ns, l);
    m->blocks_seen = seen;
    return rc;
}

void sm_layout_release(sm_layout *l)
{
    sm__layout_free(l);
}
