/* The summary engine: one streaming pass over a snapshot (see summary.h for
 * what is counted and why).  Every event is applied to the live set as it
 * is read:
 *
 *   alloc/managed_alloc/async_alloc/host_alloc -> live[MEM, addr]
 *   free/async_free/host_free                  <- live[MEM, addr]
 *   block_alloc / block_free                   -> / <- live[BLOCK, addr]
 *   vmm_reserve / vmm_addr_free                -> / <- live[VA, addr]
 *   vmm_create / vmm_release                   -> / <- live[PHYS, handle]
 *   vmm_map / vmm_unmap                        -> / <- live[MAP, addr]
 *
 * and the totals of the entry's layer and device move with it; the peak of
 * a total is updated on every increase.  Allocation sites (stack ids) carry
 * their own live bytes and peak.  The file's stack, module, sym and str
 * records are the feed's business (summary.h).
 */
#include "summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symtab.h" /* vm_grow, vm_dupstr */

enum { L_MEM = 1, L_BLOCK, L_VA, L_PHYS, L_MAP };

#define NO_SITE UINT32_MAX

void summary_init(summary *s, int want_marks)
{
    memset(s, 0, sizeof *s);
    s->want_marks = want_marks;
}

/* Device slot for a device ordinal. */
static int dev_slot(int d)
{
    return d >= 0 && d < MSNAP_MAX_DEVICES ? d : SM_DEV_UNKNOWN;
}

/* Adds n to a level, updating its peak at time t. */
static void level_add(sm_level *l, uint64_t n, uint64_t t)
{
    l->cur += n;
    if (l->cur > l->peak) {
        l->peak = l->cur;
        l->peak_t = t;
    }
}

/* Takes n off a level, never below zero. */
static void level_sub(sm_level *l, uint64_t n)
{
    l->cur = n > l->cur ? 0 : l->cur - n;
}

/* The total an allocation of this kind on this device slot counts in;
 * NULL for kinds that count nowhere (host-located VMM memory). */
static sm_level *level_for(summary *s, int kind, int slot)
{
    sm_device *d = &s->dev[slot];
    switch (kind) {
    case MSNAP_A_ALLOC: return &d->reserved;
    case MSNAP_A_VMM_CREATE:
        return slot == SM_DEV_UNKNOWN ? NULL : &d->reserved;
    case MSNAP_A_ASYNC_ALLOC: return &d->async;
    case MSNAP_A_MANAGED_ALLOC: return &d->managed;
    case MSNAP_A_HOST_ALLOC: return &s->pinned;
    case MSNAP_A_BLOCK_ALLOC: return &d->allocated;
    case MSNAP_A_VMM_RESERVE: return &d->vmm_va;
    case MSNAP_A_VMM_MAP: return &d->vmm_mapped;
    default: return NULL;
    }
}

/* Whether an allocation of this kind is an allocation site worth ranking
 * (memory, not address space or mappings). */
static int is_site_kind(int kind)
{
    return kind == MSNAP_A_ALLOC || kind == MSNAP_A_ASYNC_ALLOC ||
           kind == MSNAP_A_MANAGED_ALLOC || kind == MSNAP_A_HOST_ALLOC ||
           kind == MSNAP_A_VMM_CREATE || kind == MSNAP_A_BLOCK_ALLOC;
}

/* Index of the site for stack id (created on first use); NO_SITE when out
 * of memory. */
static uint32_t site_for(summary *s, uint32_t stack, int kind, int slot)
{
    uint64_t *v = u64map_get(&s->site_map, 0, stack);
    if (v)
        return (uint32_t)*v;
    if (vm_grow((void **)&s->sites, &s->cap_sites, s->nsites, sizeof *s->sites))
        return NO_SITE;
    if (u64map_put(&s->site_map, 0, stack, s->nsites))
        return NO_SITE;
    s->sites[s->nsites] = (sm_site){.stack = stack, .kind = kind,
                                    .device = slot == SM_DEV_UNKNOWN ? -1 : slot};
    return (uint32_t)s->nsites++;
}

/* Applies the removal of live entry e (already out of the map) to the
 * totals and its site, and returns its slot to the free list. */
static void live_remove(summary *s, uint32_t idx)
{
    sm_live *e = &s->live[idx];
    sm_level *l = level_for(s, e->kind, e->device);
    if (l)
        level_sub(l, e->size);
    if (e->site != NO_SITE) {
        sm_site *st = &s->sites[e->site];
        st->live = e->size > st->live ? 0 : st->live - e->size;
    }
    if (vm_grow((void **)&s->live_free, &s->cap_live_free, s->nlive_free,
             sizeof *s->live_free) == 0)
        s->live_free[s->nlive_free++] = idx;
}

/* Adds a live entry (layer, key) of kind with size n at time t, moving the
 * totals.  An entry already live under the same key is removed first
 * (counted in reused_addrs).  0 ok, -1 out of memory. */
static int live_add(summary *s, int layer, uint64_t key, int kind, int slot,
                    uint64_t addr, uint64_t n, uint64_t t, uint32_t stack)
{
    uint64_t old;
    if (u64map_del(&s->live_map, (uint32_t)layer, key, &old)) {
        s->reused_addrs++;
        live_remove(s, (uint32_t)old);
    }
    uint32_t idx;
    if (s->nlive_free) {
        idx = s->live_free[--s->nlive_free];
    } else {
        if (vm_grow((void **)&s->live, &s->cap_live, s->nlive_slots,
                 sizeof *s->live))
            return -1;
        idx = (uint32_t)s->nlive_slots++;
    }
    if (u64map_put(&s->live_map, (uint32_t)layer, key, idx))
        return -1; /* out of memory: the read stops, the slot is not reused */
    sm_live *e = &s->live[idx];
    *e = (sm_live){.addr = addr, .size = n, .t = t, .stack = stack,
                   .device = (int16_t)slot, .kind = (uint8_t)kind,
                   .layer = (uint8_t)layer, .site = NO_SITE};
    sm_level *l = level_for(s, kind, slot);
    if (l)
        level_add(l, n, t);
    if (is_site_kind(kind)) {
        e->site = site_for(s, stack, kind, slot);
        if (e->site != NO_SITE) {
            sm_site *st = &s->sites[e->site];
            st->count++;
            st->bytes += n;
            st->live += n;
            if (st->live > st->peak) {
                st->peak = st->live;
                st->peak_t = t;
            }
        }
    }
    return 0;
}

/* Removes the live entry (layer, key).  When it is not live, takes the
 * event's own size n (if any) off the total of fallback_kind on slot and
 * counts an unmatched free.  Returns 1 when found, 0 when not. */
static int live_del(summary *s, int layer, uint64_t key, uint64_t n,
                    int fallback_kind, int slot)
{
    uint64_t idx;
    if (u64map_del(&s->live_map, (uint32_t)layer, key, &idx)) {
        s->undo[s->undo_pos].e = s->live[idx];
        s->undo[s->undo_pos].key = key;
        s->undo[s->undo_pos].valid = 1;
        s->undo_pos = (s->undo_pos + 1) % 16;
        live_remove(s, (uint32_t)idx);
        return 1;
    }
    s->unmatched_frees++;
    sm_level *l = level_for(s, fallback_kind, slot);
    if (l && n)
        level_sub(l, n);
    return 0;
}

/* Appends a failure to a list capped at SM_MAX_LISTED.  -1 no memory. */
static int fail_push(sm_fail **list, size_t *n, const msnap_event *e)
{
    if (*n >= SM_MAX_LISTED)
        return 0;
    sm_fail *nl = realloc(*list, (*n + 1) * sizeof **list);
    if (!nl)
        return -1;
    *list = nl;
    nl[(*n)++] = (sm_fail){.t = e->t_ns, .size = e->size, .dev_free = e->aux,
                           .dev_total = e->aux2, .addr = e->addr,
                           .action = e->action, .api = e->api,
                           .device = e->device, .result = e->result,
                           .stack = e->stack};
    return 0;
}

/* Records the per-device values at an nvtx_mark.  -1 no memory. */
static int mark_push(summary *s, const msnap_event *e)
{
    if (s->nmarks >= SM_MAX_LISTED * 100)
        return 0;
    int ndev = s->ndevinfo;
    for (int d = 0; d < MSNAP_MAX_DEVICES; d++)
        if (s->dev[d].seen && d + 1 > ndev)
            ndev = d + 1;
    sm_mark *nm = realloc(s->marks, (s->nmarks + 1) * sizeof *nm);
    if (!nm)
        return -1;
    s->marks = nm;
    sm_mark *m = &nm[s->nmarks];
    m->t = e->t_ns;
    m->str = (uint32_t)e->aux;
    m->ndev = ndev;
    m->vals = ndev ? calloc((size_t)ndev, sizeof *m->vals) : NULL;
    if (ndev && !m->vals)
        return -1;
    for (int d = 0; d < ndev; d++) {
        m->vals[d].reserved = s->dev[d].reserved.cur;
        m->vals[d].async = s->dev[d].async.cur;
        m->vals[d].allocated = s->dev[d].allocated.cur;
    }
    s->nmarks++;
    return 0;
}

/* Applies one event.  -1 out of memory. */
static int apply_event(summary *s, const msnap_event *e)
{
    int slot = dev_slot(e->device);
    s->events++;
    if (e->action < MSNAP_A_COUNT)
        s->by_action[e->action]++;
    if (e->api < MSNAP_API_COUNT)
        s->by_api[e->api]++;
    if (e->t_ns > s->t_last)
        s->t_last = e->t_ns;
    switch (e->action) {
    case MSNAP_A_ALLOC:
    case MSNAP_A_MANAGED_ALLOC:
    case MSNAP_A_ASYNC_ALLOC:
    case MSNAP_A_HOST_ALLOC:
        if (e->action != MSNAP_A_HOST_ALLOC)
            s->dev[slot].seen = 1;
        return live_add(s, L_MEM, e->addr, e->action, slot, e->addr, e->size,
                        e->t_ns, e->stack);
    case MSNAP_A_FREE:
        live_del(s, L_MEM, e->addr, e->size, MSNAP_A_ALLOC, slot);
        return 0;
    case MSNAP_A_ASYNC_FREE:
        live_del(s, L_MEM, e->addr, e->size, MSNAP_A_ASYNC_ALLOC, slot);
        return 0;
    case MSNAP_A_HOST_FREE:
        live_del(s, L_MEM, e->addr, e->size, MSNAP_A_HOST_ALLOC, slot);
        return 0;
    case MSNAP_A_BLOCK_ALLOC:
        s->allocated_seen = 1;
        s->dev[slot].seen = 1;
        return live_add(s, L_BLOCK, e->addr, e->action, slot, e->addr,
                        e->size, e->t_ns, e->stack);
    case MSNAP_A_BLOCK_FREE:
        s->allocated_seen = 1;
        live_del(s, L_BLOCK, e->addr, e->size, MSNAP_A_BLOCK_ALLOC, slot);
        return 0;
    case MSNAP_A_VMM_RESERVE:
        return live_add(s, L_VA, e->addr, e->action, slot, e->addr, e->size,
                        e->t_ns, e->stack);
    case MSNAP_A_VMM_ADDR_FREE:
        live_del(s, L_VA, e->addr, e->size, MSNAP_A_VMM_RESERVE, slot);
        return 0;
    case MSNAP_A_VMM_CREATE:
        if (slot != SM_DEV_UNKNOWN)
            s->dev[slot].seen = 1;
        return live_add(s, L_PHYS, e->aux, e->action, slot, 0, e->size,
                        e->t_ns, e->stack);
    case MSNAP_A_VMM_RELEASE:
        live_del(s, L_PHYS, e->aux, e->size, MSNAP_A_VMM_CREATE, slot);
        return 0;
    case MSNAP_A_VMM_MAP:
        return live_add(s, L_MAP, e->addr, e->action, slot, e->addr, e->size,
                        e->t_ns, e->stack);
    case MSNAP_A_VMM_UNMAP: {
        /* One unmap may cover several neighbouring mappings (docs/format.md). */
        uint64_t a = e->addr, end = e->addr + e->size;
        int any = 0;
        uint64_t *idx;
        while (a < end && (idx = u64map_get(&s->live_map, L_MAP, a))) {
            uint64_t n = s->live[*idx].size;
            live_del(s, L_MAP, a, n, MSNAP_A_VMM_MAP, slot);
            any = 1;
            a += n ? n : end - a;
        }
        if (!any)
            live_del(s, L_MAP, e->addr, e->size, MSNAP_A_VMM_MAP, slot);
        return 0;
    }
    case MSNAP_A_OOM:
        s->n_oom++;
        if (slot != SM_DEV_UNKNOWN)
            s->dev[slot].seen = 1;
        return fail_push(&s->fails, &s->nfails, e);
    case MSNAP_A_ALLOC_ERROR:
        s->n_alloc_error++;
        return fail_push(&s->fails, &s->nfails, e);
    case MSNAP_A_FREE_ERROR:
        /* The driver refused the free just before: the allocation is
         * still live (docs/format.md), so it goes back. */
        s->n_free_error++;
        for (int k = 1; k <= 16; k++) {
            int i = (s->undo_pos - k + 16) % 16;
            if (s->undo[i].valid && s->undo[i].e.addr == e->addr &&
                s->undo[i].e.layer != L_PHYS) {
                sm_live u = s->undo[i].e;
                s->undo[i].valid = 0;
                if (u.site != NO_SITE) {  /* not a new allocation of the site */
                    s->sites[u.site].count--;
                    s->sites[u.site].bytes -= u.size;
                }
                if (live_add(s, u.layer, s->undo[i].key, u.kind, u.device,
                             u.addr, u.size, u.t, u.stack))
                    return -1;
                break;
            }
        }
        return fail_push(&s->free_fails, &s->nfree_fails, e);
    case MSNAP_A_NVTX_MARK:
        s->n_marks++;
        return s->want_marks ? mark_push(s, e) : 0;
    default:
        return 0;
    }
}

/* Records the header.  -1 no memory. */
static int take_header(summary *s, const msnap_header *h)
{
    s->have_header = 1;
    s->major = h->major;
    s->minor = h->minor;
    s->pid = h->pid;
    snprintf(s->host, sizeof s->host, "%s", h->host);
    snprintf(s->mode, sizeof s->mode, "%s", h->mode);
    s->t0_unix_ns = h->t0_unix_ns;
    s->argc = h->argc > 0 ? h->argc : 0;
    s->argv = calloc((size_t)s->argc + 1, sizeof *s->argv);
    if (!s->argv)
        return -1;
    for (int i = 0; i < s->argc; i++)
        if (!(s->argv[i] = vm_dupstr(h->argv[i])))
            return -1;
    s->ndevinfo = h->ndevices < 0 ? 0
                : h->ndevices > MSNAP_MAX_DEVICES ? MSNAP_MAX_DEVICES
                                                  : h->ndevices;
    memcpy(s->devinfo, h->devices, (size_t)s->ndevinfo * sizeof *s->devinfo);
    for (int i = 0; i < s->ndevinfo; i++)
        s->dev[dev_slot(s->devinfo[i].index)].seen = 1;
    return 0;
}

/* Adds or replaces a device description from a "device" record. */
static void take_device(summary *s, const msnap_device_info *d)
{
    for (int i = 0; i < s->ndevinfo; i++)
        if (s->devinfo[i].index == d->index) {
            s->devinfo[i] = *d;
            return;
        }
    if (s->ndevinfo < MSNAP_MAX_DEVICES)
        s->devinfo[s->ndevinfo++] = *d;
    s->dev[dev_slot(d->index)].seen = 1;
}

/* Folds a counters record into the peaks (see summary.h: ring mode). */
static void take_counters(summary *s, const msnap_counters *c)
{
    s->counters_records++;
    if (c->t_ns > s->t_last)
        s->t_last = c->t_ns;
    if (c->device < 0) {
        if (c->host > s->pinned.peak) {
            s->pinned.peak = c->host;
            s->pinned.peak_t = c->t_ns;
        }
        return;
    }
    sm_device *d = &s->dev[dev_slot(c->device)];
    struct { sm_level *l; uint64_t v; } f[] = {
        {&d->reserved, c->reserved}, {&d->allocated, c->allocated},
        {&d->async, c->async},       {&d->managed, c->managed},
        {&d->vmm_mapped, c->vmm_mapped}};
    d->seen = 1;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v > f[i].l->peak) {
            f[i].l->peak = f[i].v;
            f[i].l->peak_t = c->t_ns;
        }
    if (c->allocated)
        s->allocated_seen = 1;
    if (c->host > s->pinned.peak) {
        s->pinned.peak = c->host;
        s->pinned.peak_t = c->t_ns;
    }
}

/* Live-at-end count/bytes per device for the memory layers. */
static void finish_live(summary *s)
{
    for (size_t i = 0; i < s->live_map.cap; i++) {
        if (!s->live_map.slots[i].used)
            continue;
        sm_live *e = &s->live[s->live_map.slots[i].value];
        if (e->site != NO_SITE)
            s->sites[e->site].live_count++;
        if (e->kind == MSNAP_A_ALLOC || e->kind == MSNAP_A_ASYNC_ALLOC ||
            e->kind == MSNAP_A_MANAGED_ALLOC || e->kind == MSNAP_A_VMM_CREATE) {
            s->dev[e->device].live_count++;
            s->dev[e->device].live_bytes += e->size;
        }
    }
}

void summary_host_live(const summary *s, uint64_t *count, uint64_t *bytes)
{
    *count = *bytes = 0;
    for (size_t i = 0; i < s->live_map.cap; i++) {
        if (!s->live_map.slots[i].used)
            continue;
        const sm_live *e = &s->live[s->live_map.slots[i].value];
        if (e->kind == MSNAP_A_HOST_ALLOC) {
            (*count)++;
            *bytes += e->size;
        }
    }
}

int summary_read(summary *s, const char *path, char *err, size_t errlen)
{
    char rerr[512] = "";
    msnap_reader *r = msnap_reader_open(path, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s: %s", path, rerr[0] ? rerr : "cannot open");
        return 2;
    }
    msnap_record rec;
    int rc, ret = 0, in_state = 0;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        int mem = 0;
        s->lines = rec.line;
        if (!s->have_header && rec.type != MSNAP_REC_HEADER) {
            snprintf(err, errlen,
                     "%s: line %" PRIu64 ": not a memsnap snapshot "
                     "(the first line is not a header)", path, rec.line);
            ret = 2;
            break;
        }
        if (rec.type != MSNAP_REC_LIVE)
            in_state = 0;
        if (s->feed && (s->have_header || rec.type == MSNAP_REC_HEADER) &&
            s->feed(s->feed_ctx, &rec)) {
            snprintf(err, errlen, "%s: out of memory", path);
            ret = 2;
            break;
        }
        switch (rec.type) {
        case MSNAP_REC_HEADER:
            if (!s->have_header)
                mem = take_header(s, &rec.u.header);
            break;
        case MSNAP_REC_DEVICE: take_device(s, &rec.u.device); break;
        case MSNAP_REC_EVENT: mem = apply_event(s, &rec.u.event); break;
        case MSNAP_REC_STACK:   /* tables: the feed's (summary.h) */
        case MSNAP_REC_MODULE:
        case MSNAP_REC_SYMBOL:
        case MSNAP_REC_STR:
            break;
        case MSNAP_REC_COUNTERS: take_counters(s, &rec.u.counters); break;
        case MSNAP_REC_STATE_BEGIN:
            in_state = 1;
            s->state_seen = 1;
            s->state_t = rec.u.state_begin.t_ns;
            s->state_nlive = 0;
            s->state_bytes = 0;
            break;
        case MSNAP_REC_LIVE:
            if (in_state) {
                s->state_nlive++;
                /* Device memory held: not VA reservations (address space),
                 * not mappings (the physical handle is counted) and not
                 * allocator blocks (inside reserved memory). */
                int k = rec.u.live.kind;
                if (k == MSNAP_A_ALLOC || k == MSNAP_A_MANAGED_ALLOC ||
                    k == MSNAP_A_ASYNC_ALLOC || (k == MSNAP_A_VMM_CREATE && rec.u.live.device >= 0))
                    s->state_bytes += rec.u.live.size;
            }
            break;
        case MSNAP_REC_TRAILER:
            s->trailer_seen = 1;
            s->tr_events = rec.u.trailer.events;
            s->tr_dropped = rec.u.trailer.dropped;
            s->tr_stacks_dropped = rec.u.trailer.stacks_dropped;
            snprintf(s->tr_reason, sizeof s->tr_reason, "%s",
                     rec.u.trailer.reason ? rec.u.trailer.reason : "");
            if (rec.u.trailer.t_ns > s->t_last)
                s->t_last = rec.u.trailer.t_ns;
            break;
        }
        if (mem) {
            snprintf(err, errlen, "%s: out of memory", path);
            ret = 2;
            break;
        }
    }
    if (ret == 0 && rc < 0) {
        snprintf(err, errlen, "%s: %s", path, msnap_reader_error(r));
        ret = 2;
    }
    if (ret == 0 && !s->have_header) {
        snprintf(err, errlen, "%s: not a memsnap snapshot (no header line)",
                 path);
        ret = 2;
    }
    s->truncated = msnap_reader_truncated(r);
    msnap_reader_close(r);
    if (ret == 0)
        finish_live(s);
    return ret;
}

/* qsort order: peak descending, then stack id ascending. */
static int site_cmp(const void *a, const void *b)
{
    const sm_site *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak > y->peak ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

const sm_site *summary_sites_by_peak(summary *s, size_t *n)
{
    /* Sorting moves sites, so the id -> index map is dropped first; it is
     * only needed while reading. */
    u64map_free(&s->site_map);
    if (s->nsites)
        qsort(s->sites, s->nsites, sizeof *s->sites, site_cmp);
    *n = s->nsites;
    return s->sites;
}

const char *summary_fmt_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.2f %s", v, unit[u]);
    return buf;
}

void summary_free(summary *s)
{
    for (int i = 0; s->argv && i < s->argc; i++)
        free(s->argv[i]);
    free(s->argv);
    free(s->fails);
    free(s->free_fails);
    for (size_t i = 0; i < s->nmarks; i++)
        free(s->marks[i].vals);
    free(s->marks);
    u64map_free(&s->live_map);
    free(s->live);
    free(s->live_free);
    u64map_free(&s->site_map);
    free(s->sites);
    memset(s, 0, sizeof *s);
}
