/* Several snapshots in one picture (compare.h): matched site colours, the
 * comparison table, the sites whose peak changed most, and the stacked
 * panels on one y scale.
 *
 * Matching sites across snapshots.  Stack ids and addresses differ from
 * run to run (another process, ASLR), so a site is matched by
 * sm_site_key: the hash of its label (analyze/label.c), which holds no
 * address or stack id and leaves the allocator's own frames out, so it
 * reads the same in another run of the same binary, on another rank, or
 * under another allocator setting (a rebuilt binary whose lines moved
 * shows a site as gone and new).  A site's peak in a snapshot is its
 * group's (sm_groups: the stacks of one device and layer whose labels read
 * the same, their sum over time), the figure summary prints; the groups
 * of one key on several devices add up.
 */
#include "compare.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/findings.h"


#define TEXT 0x111111u
#define MUTED 0x555555u
#define UP 0xb22222u
#define DOWN 0x1d7a3au

/* A site of one model by key: its peak and the stack that names it. */
typedef struct keyed {
    uint64_t key, peak, rep_peak;
    uint32_t stack;
    uint32_t ord;       /* global_top: the order collected (file, device, rank) */
} keyed;

static int cmp_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Largest peak first; equal peaks in the order collected, so that the
 * sites of one file keep their ranks, the colours `render` gives them. */
static int cmp_peak_desc(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->peak != y->peak)
        return x->peak > y->peak ? -1 : 1;
    return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* The stacked-layer sites of m by key, sorted by key; NULL + *n = 0 when
 * none or out of memory. */
static keyed *model_keys(const sm_model *m, size_t *n)
{
    size_t ng;
    const sm_group *gr = sm_groups(m, &ng);
    int cls = sm_blocks_seen(m) ? SM_CLS_BLOCK : SM_CLS_MEM;
    keyed *k = malloc((ng + 1) * sizeof *k);
    *n = 0;
    if (!k)
        return NULL;
    size_t c = 0;
    for (size_t i = 0; i < ng; i++)
        if (gr[i].cls == cls && gr[i].peak)
            k[c++] = (keyed){.key = sm_site_key(sm_labels_of(m), gr[i].stack),
                             .peak = gr[i].peak, .rep_peak = gr[i].peak,
                             .stack = gr[i].stack};
    qsort(k, c, sizeof *k, cmp_key);
    size_t w = 0;
    for (size_t i = 0; i < c; i++) {
        if (w && k[w - 1].key == k[i].key) {
            k[w - 1].peak += k[i].peak;
            if (k[i].rep_peak > k[w - 1].rep_peak) {
                k[w - 1].rep_peak = k[i].rep_peak;
                k[w - 1].stack = k[i].stack;
            }
        } else {
            k[w++] = k[i];
        }
    }
    *n = w;
    return k;
}

static const keyed *find_key(const keyed *k, size_t n, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && k[lo].key == key ? &k[lo] : NULL;
}

/* The keys of every model's top sites, largest peak first, each once. */
static keyed *global_top(sm_model **models, int n, size_t *count)
{
    size_t cap = 0, c = 0;
    for (int i = 0; i < n; i++)
        cap += SM_MAX_TOP * SM_NDEV;
    keyed *g = malloc((cap + 1) * sizeof *g);
    *count = 0;
    if (!g)
        return NULL;
    for (int i = 0; i < n; i++) {
        size_t ns, ngr;
        const sm_site *sites = sm_sites(models[i], &ns);
        const sm_group *gr = sm_groups(models[i], &ngr);
        for (int d = 0; d < SM_NDEV; d++) {
            const sm_dev *v = sm_device(models[i], d);
            for (int r = 0; r < v->ntop; r++) {
                const sm_group *s = &gr[sites[v->top[r]].grp];
                g[c] = (keyed){.key = sm_site_key(sm_labels_of(models[i]), s->stack),
                               .peak = s->peak, .stack = s->stack, .ord = (uint32_t)c};
                c++;
            }
        }
    }
    qsort(g, c, sizeof *g, cmp_peak_desc);
    size_t w = 0;
    for (size_t i = 0; i < c; i++) {
        int seen = 0;
        for (size_t j = 0; j < w && !seen; j++)
            seen = g[j].key == g[i].key;
        if (!seen)
            g[w++] = g[i];
    }
    *count = w;
    return g;
}

void viz_match_colours(sm_model **models, int n)
{
    size_t ng;
    keyed *g = global_top(models, n, &ng);
    if (!g)
        return;
    int spare = (int)ng;   /* colours after the global ones */
    for (int i = 0; i < n; i++) {
        size_t ns;
        const sm_site *sites = sm_sites(models[i], &ns);
        for (int d = 0; d < SM_NDEV; d++) {
            const sm_dev *v = sm_device(models[i], d);
            int used[SM_MAX_TOP];
            for (int r = 0; r < v->ntop; r++) {
                uint64_t key = sm_site_key(sm_labels_of(models[i]), sites[v->top[r]].stack);
                int idx = -1;
                for (size_t j = 0; j < ng && idx < 0; j++)
                    if (g[j].key == key)
                        idx = (int)j;
                /* Two stacks of one key in a panel (they differ only in a
                 * line or inside the allocator): the second gets a colour
                 * of its own. */
                for (int q = 0; q < r && idx >= 0; q++)
                    if (used[q] == idx)
                        idx = -1;
                if (idx < 0)
                    idx = spare++;
                used[r] = idx;
                sm_set_colour(models[i], d, r, viz_site_colour(idx));
            }
        }
    }
    free(g);
}

const char *viz_cmp_letter(int i, char *buf, size_t cap)
{
    if (i < 26)
        snprintf(buf, cap, "%c", 'A' + i);
    else
        snprintf(buf, cap, "%d", i + 1);
    return buf;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

int viz_cmp_build(sm_model **models, int n, int per_other, viz_cmp *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->rows = calloc((size_t)n + 1, sizeof *out->rows);
    if (!out->rows)
        return -1;
    for (int i = 0; i < n; i++) {
        const sm_model *m = models[i];
        viz_cmp_row *r = &out->rows[i];
        sm_peak_totals(m, &r->peak_stacked, &r->peak_reserved);
        r->blocks = sm_blocks_seen(m);
        r->events = sm_events(m);
        const sm_layout *l = sm_layout_at(m);
        uint64_t tf = 0, lf = 0;
        for (int d = 0; d < SM_NDEV; d++) {
            tf += l->dev[d].total_free;
            if (l->dev[d].largest_free > lf)
                lf = l->dev[d].largest_free;
        }
        r->frag_at = l->at;
        r->frag_t = l->t_ns;
        r->frag_known = r->blocks && l->valid;
        r->frag_free = sm_frag_free(tf, lf);
        r->frag_peak = sm_frag_peak(r->peak_stacked, r->peak_reserved);
        if (r->frag_peak < 0)
            r->frag_peak = 0;
        size_t no;
        uint64_t total;
        const sm_oom *o = sm_ooms(m, &no, &total);
        for (size_t k = 0; k < no; k++)
            if (o[k].action == MSNAP_A_OOM) {
                if (!r->ooms) {
                    r->oom_t = o[k].t_ns;
                    r->oom_requested = o[k].requested;
                }
                r->ooms++;
            }
        if (total > r->ooms)
            r->ooms = total;
    }
    if (n < 2 || per_other <= 0)
        return 0;
    size_t na;
    keyed *ka = model_keys(models[0], &na);
    out->changes = calloc((size_t)(n - 1) * (size_t)per_other + 1,
                          sizeof *out->changes);
    if (!out->changes) {
        free(ka);
        return -1;
    }
    size_t ng;
    keyed *g = global_top(models, n, &ng);
    for (int j = 1; j < n; j++) {
        size_t nb;
        keyed *kb = model_keys(models[j], &nb);
        /* Every key of either side with its two peaks. */
        keyed *u = malloc((na + nb + 1) * sizeof *u);
        uint64_t *after = malloc((na + nb + 1) * sizeof *after);
        int *in_a = malloc((na + nb + 1) * sizeof *in_a);
        if (!u || !after || !in_a) {
            free(u);
            free(after);
            free(in_a);
            free(kb);
            continue;
        }
        size_t nu = 0;
        for (size_t i = 0; i < na; i++) {
            const keyed *b = find_key(kb, nb, ka[i].key);
            u[nu] = ka[i];
            after[nu] = b ? b->peak : 0;
            in_a[nu++] = 1;
        }
        for (size_t i = 0; i < nb; i++)
            if (!find_key(ka, na, kb[i].key)) {
                u[nu] = kb[i];
                u[nu].peak = 0;
                after[nu] = kb[i].peak;
                in_a[nu++] = 0;
            }
        /* The per_other largest changes (selection; nu is small). */
        uint32_t sa[64], sb[64];
        int pa[64], pb[64], nsa = 0, nsb = 0;
        for (int k = 0; k < per_other && k < 64; k++) {
            size_t best = SIZE_MAX;
            uint64_t bd = 0;
            for (size_t i = 0; i < nu; i++) {
                uint64_t d = absdiff(u[i].peak, after[i]);
                if (d > bd) {
                    bd = d;
                    best = i;
                }
            }
            if (best == SIZE_MAX)
                break;
            viz_cmp_change *c = &out->changes[out->nchanges++];
            c->other = j;
            c->before = u[best].peak;
            c->after = after[best];
            c->colour = VIZ_OTHER;
            for (size_t q = 0; q < ng; q++)
                if (g[q].key == u[best].key) {
                    c->colour = viz_site_colour((int)q);
                    break;
                }
            if (in_a[best]) {
                pa[nsa] = (int)(out->nchanges - 1);
                sa[nsa++] = u[best].stack;
            } else {
                pb[nsb] = (int)(out->nchanges - 1);
                sb[nsb++] = u[best].stack;
            }
            after[best] = u[best].peak;   /* taken: no change left */
        }
        /* Labels told apart within each side. */
        char (*labs)[SM_LABEL_MAX] = malloc(64 * sizeof *labs);
        if (labs) {
            sm_site_labels(sm_labels_of(models[0]), sa, nsa, labs);
            for (int k = 0; k < nsa; k++)
                memcpy(out->changes[pa[k]].label, labs[k], SM_LABEL_MAX);
            sm_site_labels(sm_labels_of(models[j]), sb, nsb, labs);
            for (int k = 0; k < nsb; k++)
                memcpy(out->changes[pb[k]].label, labs[k], SM_LABEL_MAX);
            free(labs);
        }
        free(u);
        free(after);
        free(in_a);
        free(kb);
    }
    free(g);
    free(ka);
    return 0;
}

void viz_cmp_free(viz_cmp *c)
{
    free(c->rows);
    free(c->changes);
    memset(c, 0, sizeof *c);
}

/* ---- the picture ---------------------------------------------------------- */

/* Panels for every model and device; titles in titles[] (256 each). */
static int make_panels(sm_model **models, const char **names, int n,
                       int letters, viz_panel **pan, char (**titles)[256])
{
    int np = 0;
    *pan = calloc((size_t)n * SM_NDEV + 1, sizeof **pan);
    *titles = calloc((size_t)n * SM_NDEV + 1, sizeof **titles);
    if (!*pan || !*titles) {
        free(*pan);
        free(*titles);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int slots[SM_NDEV];
        int ns = viz_model_slots(models[i], slots);
        for (int k = 0; k < ns; k++) {
            char prefix[200], l[16];
            if (letters)
                snprintf(prefix, sizeof prefix, "%s: %s",
                         viz_cmp_letter(i, l, sizeof l), names[i]);
            else
                snprintf(prefix, sizeof prefix, "%s", names[i]);
            viz_panel_title(models[i], slots[k], prefix, (*titles)[np],
                            sizeof (*titles)[np]);
            (*pan)[np] = (viz_panel){.m = models[i], .slot = slots[k],
                                     .title = (*titles)[np]};
            np++;
        }
    }
    return np;
}

static const char *pct(double v, int known, char *buf, size_t cap)
{
    if (!known)
        snprintf(buf, cap, "n/a");
    else
        snprintf(buf, cap, "%.3f", v);
    return buf;
}

#define NCOL 7

/* The cells of the table: header row, then one row per snapshot. */
static void table_cells(const viz_cmp *cmp, const char **names, int i,
                        char cells[NCOL][128])
{
    if (i < 0) {
        static const char *h[NCOL] = {"snapshot", "peak allocated",
                                      "peak reserved", "frag free",
                                      "frag peak", "OOM", "events"};
        for (int k = 0; k < NCOL; k++)
            snprintf(cells[k], 128, "%s", h[k]);
        return;
    }
    const viz_cmp_row *r = &cmp->rows[i];
    char l[16], a[32], t[32];
    snprintf(cells[0], 128, "%s: %s", viz_cmp_letter(i, l, sizeof l), names[i]);
    viz_fit_label(cells[0], 44);
    if (r->blocks)
        msnap_size_text(r->peak_stacked, cells[1], 128);
    else
        snprintf(cells[1], 128, "n/a (no blocks)");
    msnap_size_text(r->peak_reserved, cells[2], 128);
    pct(r->frag_free, r->frag_known, cells[3], 128);
    pct(r->frag_peak, r->frag_known, cells[4], 128);
    if (r->ooms)
        snprintf(cells[5], 128, "%" PRIu64 " (at %s: %s)", r->ooms,
                 msnap_time_text(r->oom_t, t, sizeof t),
                 msnap_size_text(r->oom_requested, a, sizeof a));
    else
        snprintf(cells[5], 128, "none");
    snprintf(cells[6], 128, "%" PRIu64, r->events);
}

/* Draws (c != NULL) or measures the header band; returns its height. */
static int draw_header(canvas *c, const viz_cmp *cmp, const char **names,
                       int width)
{
    int ts = viz_text_scale(width), lh = (CANVAS_LINE_H + 4) * ts;
    int y = 8, x0 = 10;
    char buf[512], l0[16], l1[16];
    int n = cmp->n;
    if (c) {
        canvas_group(c, "title", NULL);
        /* a narrow picture takes the title at the text scale, cut if
         * even that does not fit */
        snprintf(buf, sizeof buf, "Comparison: GPU memory of each snapshot, one y scale");
        int tsz = canvas_text_w(buf, ts + 1) <= width - 20 ? ts + 1 : ts;
        canvas_fit(buf, width - 20, tsz);
        canvas_text(c, x0, y, buf, TEXT, tsz);
        canvas_group_end(c);
        canvas_group(c, "subtitle", NULL);
    }
    y += CANVAS_LINE_H * (ts + 1) + 6;
    if (c) {
        snprintf(buf, sizeof buf,
                 "Same colour = same allocation site (matched by its frames). "
                 "frag free = 1 - largest free block / free inside reserved "
                 "(at the OOM, else the peak); frag peak = 1 - peak allocated / peak reserved.");
        int room = width - 20;
        if (canvas_text_w(buf, ts) > room) {
            /* two lines: the first as many words as fit, the second the
             * rest (cut with ".." only if even that is too wide) */
            char *cut = NULL;
            for (char *sp = strchr(buf, ' '); sp; sp = strchr(sp + 1, ' ')) {
                *sp = '\0';
                int fits = canvas_text_w(buf, ts) <= room;
                *sp = ' ';
                if (!fits)
                    break;
                cut = sp;
            }
            if (cut)
                *cut = '\0';
            canvas_fit(buf, room, ts);
            canvas_text(c, x0, y, buf, MUTED, ts);
            y += (CANVAS_LINE_H + 3) * ts;
            if (cut) {
                canvas_fit(cut + 1, room, ts);
                canvas_text(c, x0, y, cut + 1, MUTED, ts);
            }
        } else {
            canvas_text(c, x0, y, buf, MUTED, ts);
        }
        canvas_group_end(c);
    } else {
        y += (CANVAS_LINE_H + 3) * ts;
    }
    y += (CANVAS_LINE_H + 3) * ts + 6;
    /* table */
    int colw[NCOL] = {0};
    char cells[NCOL][128];
    for (int i = -1; i < n; i++) {
        table_cells(cmp, names, i, cells);
        for (int k = 0; k < NCOL; k++) {
            int w = canvas_text_w(cells[k], ts) + 18 * ts;
            if (w > colw[k])
                colw[k] = w;
        }
    }
    if (c)
        canvas_group(c, "table", NULL);
    for (int i = -1; i < n; i++) {
        table_cells(cmp, names, i, cells);
        int x = x0;
        if (c) {
            canvas_group(c, i < 0 ? "table-head" : "table-row", cells[0]);
            if (i < 0)
                canvas_rect(c, x0 - 4, y - 2, width - 10, y + lh - 2, 0xeef2f7);
        }
        for (int k = 0; k < NCOL && c; k++) {
            /* a cell that would pass the right edge is cut there */
            if (canvas_text_w(cells[k], ts) > width - 10 - x)
                canvas_fit(cells[k], width - 10 - x, ts);
            canvas_text(c, x, y + 1, cells[k], i < 0 ? MUTED : TEXT, ts);
            x += colw[k];
            if (x > width - 20)
                break;
        }
        if (c)
            canvas_group_end(c);
        y += lh;
    }
    if (c)
        canvas_group_end(c);
    y += 6;
    /* changes */
    if (c)
        canvas_group(c, "changes", NULL);
    for (int j = 1; j < n; j++) {
        viz_cmp_letter(j, l1, sizeof l1);
        viz_cmp_letter(0, l0, sizeof l0);
        snprintf(buf, sizeof buf, "Sites whose peak changed most, %s against %s:", l1, l0);
        int any = 0;
        for (size_t k = 0; k < cmp->nchanges; k++)
            any |= cmp->changes[k].other == j;
        if (!any)
            snprintf(buf, sizeof buf, "Sites, %s against %s: no peak changed", l1, l0);
        if (c)
            canvas_text(c, x0, y, buf, TEXT, ts);
        y += lh;
        for (size_t k = 0; k < cmp->nchanges; k++) {
            const viz_cmp_change *ch = &cmp->changes[k];
            if (ch->other != j)
                continue;
            if (c) {
                char a[32], b[32], d[32], lab[SM_LABEL_MAX];
                snprintf(lab, sizeof lab, "%s", ch->label);
                viz_fit_label(lab, 70);
                int up = ch->after > ch->before;
                snprintf(buf, sizeof buf, "%s%s", up ? "+" : "-",
                         msnap_size_text(absdiff(ch->after, ch->before), d, sizeof d));
                int sx = x0 + 12 * ts;
                int sy = y + ts;
                canvas_group(c, "change", lab);
                canvas_rect(c, sx, sy, sx + 10 * ts, sy + CANVAS_CAP_H * ts, ch->colour);
                int x = sx + 14 * ts;
                x += canvas_text(c, x, y, buf, up ? UP : DOWN, ts);
                x = sx + 14 * ts + canvas_text_w("+1023.5 MiB", ts) + 8 * ts;
                snprintf(buf, sizeof buf, "%s -> %s  %s",
                         msnap_size_text(ch->before, a, sizeof a),
                         msnap_size_text(ch->after, b, sizeof b), lab);
                canvas_fit(buf, width - 10 - x, ts);
                canvas_text(c, x, y, buf, TEXT, ts);
                canvas_group_end(c);
            }
            y += lh;
        }
        y += 4;
    }
    if (c)
        canvas_group_end(c);
    return y + 8;
}

int viz_compare(sm_model **models, const char **names, int n,
                const viz_cmp *cmp, canvas *c, int width, int height,
                viz_geom *geoms, int max_geoms, int *ngeoms)
{
    viz_panel *pan;
    char (*titles)[256];
    int np = make_panels(models, names, n, 1, &pan, &titles);
    if (np < 0)
        return -1;
    int top_h = draw_header(NULL, cmp, names, width);
    int rc = viz_timeline_panels(pan, np, c, width, height, top_h, 1, geoms,
                                 max_geoms, ngeoms);
    if (rc == 0)
        draw_header(c, cmp, names, width);
    free(pan);
    free(titles);
    return rc;
}

int viz_multi(sm_model **models, const char **names, int n, canvas *c,
              int width, int height, viz_geom *geoms, int max_geoms,
              int *ngeoms)
{
    viz_panel *pan;
    char (*titles)[256];
    int np = make_panels(models, names, n, 0, &pan, &titles);
    if (np < 0)
        return -1;
    int ts = viz_text_scale(width);
    int top_h = 8 + CANVAS_LINE_H * (ts + 1) + 6 + (CANVAS_LINE_H + 3) * ts + 10;
    int rc = viz_timeline_panels(pan, np, c, width, height, top_h, 1, geoms,
                                 max_geoms, ngeoms);
    if (rc == 0) {
        char buf[256];
        snprintf(buf, sizeof buf, "GPU memory over time: %d files (one per rank), one y scale", n);
        canvas_fit(buf, width - 20, ts + 1);
        canvas_group(c, "title", NULL);
        canvas_text(c, 10, 8, buf, TEXT, ts + 1);
        canvas_group_end(c);
        snprintf(buf, sizeof buf, "A panel per file and device; same colour = same "
                 "allocation site (matched by its frames) in every panel.");
        canvas_fit(buf, width - 20, ts);
        canvas_group(c, "subtitle", NULL);
        canvas_text(c, 10, 8 + CANVAS_LINE_H * (ts + 1) + 6, buf, MUTED, ts);
        canvas_group_end(c);
    }
    free(pan);
    free(titles);
    return rc;
}
