/* dump_model SNAP [oom|peak|end|TIME] [marks:WORD] [by:category]: prints
 * what the renderer's model (analyze/model.h) holds after both passes, as text
 * for golden files: the process's peaks as render and compare read them,
 * each device's peaks, and the segment layout at the chosen moment span by
 * span (what the segment map paints).  With marks:WORD (render's --x
 * marks:WORD) it first prints the marks axis: how many marks were read, the
 * x range and each OOM's place on it, in mark units.  With by:category
 * (render --by category, the default rules plus $MEMSNAP_CATEGORY_RULES) it
 * first prints the timeline's bands per device, one line each:
 *
 *   band DEVICE CATEGORY peak P at_total_peak A column V
 *
 * P and A the band's own figures (model.h "Bands"), V its value in the
 * first timeline column (1600 pixels wide) whose top is the total's peak,
 * after a line "bands DEVICE total_peak T column C".  Exit 0, or 2 with a
 * one-line message. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/category.h"
#include "analyze/model.h"
#include "viz/render.h"

static const char *span_name(int what)
{
    switch (what) {
    case SM_SPAN_BLOCK: return "block";
    case SM_SPAN_USED: return "used";
    case SM_SPAN_FREE: return "free";
    default: return "unmapped";
    }
}

/* The bands by category (see the top), per device with a stacked area. */
static void print_bands(const sm_model *m)
{
    int ncol = sm_options(m)->columns;
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev *v = sm_device(m, d);
        if (!v->seen || !v->peak_stacked || !v->cols)
            continue;
        int col = 0;
        while (col < ncol && v->cols[col].total_max != v->peak_stacked)
            col++;
        printf("bands %d total_peak %" PRIu64 " column %d\n",
               d == SM_DEV_UNKNOWN ? -1 : d, v->peak_stacked, col < ncol ? col : -1);
        for (int b = 0; b <= v->nbands; b++) {
            if (b == v->nbands && !v->band_peak[b])
                break;
            printf("band %d %s peak %" PRIu64 " at_total_peak %" PRIu64
                   " column %" PRIu64 "\n", d == SM_DEV_UNKNOWN ? -1 : d,
                   sm_band_category(m, d, b), v->band_peak[b], v->band_at_peak[b],
                   sm_col_value(m, d, col, b));
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: dump_model SNAP [oom|peak|end|TIME] [marks:WORD] "
                "[by:category]\n");
        return 2;
    }
    sm_opts o = {.top = 8, .columns = 0, .at = SM_AT_DEFAULT};
    cat_rules *rules = NULL;
    char err[512];
    if (argc >= 3 && !strcmp(argv[argc - 1], "by:category")) {
        const char *path = getenv("MEMSNAP_CATEGORY_RULES");
        argc--;
        o.by = SM_BY_CATEGORY;
        o.columns = viz_timeline_columns(1600);
        if (!(rules = cat_rules_new()) ||
            (path && *path && cat_rules_load(rules, path, err, sizeof err))) {
            fprintf(stderr, "dump_model: %s\n", rules ? err : "out of memory");
            cat_rules_free(rules);
            return 2;
        }
        o.rules = rules;
    }
    if (argc >= 3 && sm_parse_at(argv[2], &o.at, &o.at_t_ns)) {
        fprintf(stderr, "dump_model: bad moment \"%s\"\n", argv[2]);
        return 2;
    }
    if (argc == 4) {
        if (strncmp(argv[3], "marks:", 6) || !argv[3][6] ||
            strlen(argv[3] + 6) >= sizeof o.x_word) {
            fprintf(stderr, "dump_model: bad axis \"%s\" (marks:WORD)\n", argv[3]);
            return 2;
        }
        o.x_mode = SM_X_MARKS;
        snprintf(o.x_word, sizeof o.x_word, "%s", argv[3] + 6);
    }
    sm_model *m = sm_new(&o);
    if (!m || sm_read_file(m, argv[1], 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", m ? err : "out of memory");
        sm_free(m);
        cat_rules_free(rules);
        return 2;
    }
    if (o.by == SM_BY_CATEGORY)
        print_bands(m);
    if (o.x_mode == SM_X_MARKS) {
        const char *word;
        size_t nmarks = sm_marks(m, &word), nooms;
        uint64_t lo, hi;
        sm_x_range(m, &lo, &hi);
        printf("marks %zu of \"%s\", x %.3f to %.3f\n", nmarks, word,
               lo / SM_MARK_SCALE, hi / SM_MARK_SCALE);
        const sm_oom *oo = sm_ooms(m, &nooms, NULL);
        for (size_t i = 0; i < nooms; i++)
            printf("oom at event %" PRIu64 ": x %.3f\n", oo[i].event_index,
                   sm_x_of_event(m, oo[i].event_index, oo[i].t_ns) / SM_MARK_SCALE);
    }
    uint64_t stacked, reserved;
    sm_peak_totals(m, &stacked, &reserved);
    printf("events %" PRIu64 ", stacked layer %s\n", sm_events(m),
           sm_blocks_seen(m) ? "allocated" : "reserved");
    printf("process peak reserved %" PRIu64 ", peak stacked %" PRIu64 "\n",
           reserved, stacked);
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev *v = sm_device(m, d);
        if (!v->seen)
            continue;
        printf("device %d: peak reserved %" PRIu64 " at %" PRIu64
               ", peak allocated %" PRIu64 ", peak stacked %" PRIu64 "\n",
               d == SM_DEV_UNKNOWN ? -1 : d, v->peak_reserved,
               v->peak_reserved_t, v->peak_allocated, v->peak_stacked);
    }
    const sm_layout *l = sm_layout_at(m);
    printf("layout valid %d at %d, t %" PRIu64 ", after event %" PRIu64 "\n",
           l->valid, l->at, l->t_ns, l->event_index);
    for (int d = 0; d < SM_NDEV; d++) {
        const sm_dev_layout *dl = &l->dev[d];
        if (!dl->segments && !dl->block_bytes)
            continue;
        printf("device %d: %" PRIu64 " segments, %" PRIu64 " bytes, mapped %"
               PRIu64 ", blocks %" PRIu64 ", free %" PRIu64 ", largest free %"
               PRIu64 "\n", d == SM_DEV_UNKNOWN ? -1 : d, dl->segments,
               dl->segment_bytes, dl->mapped_bytes, dl->block_bytes,
               dl->total_free, dl->largest_free);
    }
    size_t nsites;
    const sm_site *sites = sm_sites(m, &nsites);
    for (size_t i = 0; i < l->nsegs; i++) {
        const sm_segment *s = &l->segs[i];
        printf("segment 0x%" PRIx64 " +%" PRIu64 " %s device %d\n", s->addr,
               s->size, s->kind ? msnap_action_name(s->kind) : "(blocks)",
               s->device == SM_DEV_UNKNOWN ? -1 : s->device);
        for (size_t k = s->first_span; k < s->first_span + s->nspans; k++) {
            const sm_span *p = &l->spans[k];
            printf("  %-8s 0x%" PRIx64 " +%" PRIu64, span_name(p->what),
                   p->addr, p->size);
            if (p->site < nsites)
                printf(" stack %" PRIu32, sites[p->site].stack);
            printf("\n");
        }
    }
    sm_free(m);
    cat_rules_free(rules);
    return 0;
}
