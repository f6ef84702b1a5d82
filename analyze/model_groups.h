/* Site groups (model_groups.c): the sites as every view shows them.
 *
 * A part of model.h, included by it (include model.h, not this). */
#ifndef MEMSNAP_ANALYZE_MODEL_GROUPS_H
#define MEMSNAP_ANALYZE_MODEL_GROUPS_H
#ifndef MEMSNAP_ANALYZE_MODEL_H
#error "include analyze/model.h"
#endif

/* A site as every view shows it: the sites (stacks) of one layer and
 * device whose labels read the same are one (label.c), with the figures of
 * their sum over time (the file's change log replayed, analysis.h). */
typedef struct sm_group {
    uint32_t stack;            /* its member with the highest peak: names it */
    uint8_t layer;             /* MSNAP_LAYER_RESERVED, _ALLOCATED or _PINNED */
    uint8_t cls;               /* enum sm_cls */
    uint8_t kind;              /* the representative's first allocation's action */
    int16_t device;            /* slot */
    int rank;                  /* 0..top-1 on its device in the stacked layer, -1 */
    uint64_t live, peak, peak_t;     /* live (at the end), peak and when */
    uint64_t count, bytes, live_count; /* summed over its members */
    uint32_t nmembers;
} sm_group;

/* The sites as every view shows them (sm_group), after the read. */
const sm_group *sm_groups(const sm_model *m, size_t *n);

#endif
