/* The flame graph's tree (flame.h). */
#include "flame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/state.h"
#include "util/size.h"
#include "util/u64map.h"

int fl_init(fl_tree *t)
{
    memset(t, 0, sizeof *t);
    t->n = calloc(64, sizeof *t->n);
    if (!t->n)
        return -1;
    t->cap = 64;
    t->nn = 1;
    t->n[0] = (fl_node){.name = strdup("all"), .parent = FL_NONE, .first = FL_NONE,
                        .next = FL_NONE};
    return t->n[0].name ? 0 : -1;
}

void fl_free(fl_tree *t)
{
    for (size_t i = 0; i < t->nn; i++)
        free(t->n[i].name);
    free(t->n);
    memset(t, 0, sizeof *t);
}

/* The child of p named name, made when new; FL_NONE when out of memory. */
static uint32_t child(fl_tree *t, uint32_t p, const char *name)
{
    for (uint32_t c = t->n[p].first; c != FL_NONE; c = t->n[c].next)
        if (!strcmp(t->n[c].name, name))
            return c;
    if (msnap_grow((void **)&t->n, &t->cap, t->nn, sizeof *t->n))
        return FL_NONE;
    char *nm = strdup(name);
    if (!nm)
        return FL_NONE;
    uint32_t c = (uint32_t)t->nn++;
    t->n[c] = (fl_node){.name = nm, .parent = p, .first = FL_NONE, .next = t->n[p].first,
                        .depth = t->n[p].depth + 1};
    t->n[p].first = c;
    if (t->n[c].depth > t->maxdepth)
        t->maxdepth = t->n[c].depth;
    return c;
}

/* Frame i of a stack as a node name: "fn (file:line)", the file as a base
 * name; else what the tables give. */
static void frame_name(const sm_model *m, uint32_t stack, int i, char *buf, size_t cap)
{
    sm_frame_info f;
    sm_frame_get(m, stack, i, &f);
    if (f.fn && f.fn[0] && f.file && f.file[0] && f.line)
        snprintf(buf, cap, "%s (%s:%d)", f.fn, sm_base_name(f.file), f.line);
    else if (f.fn && f.fn[0])
        sm_short_name(f.fn, buf, cap);
    else
        sm_frame(m, stack, i, buf, cap);
}

/* The path of one stack: its leaf node (made when new).  FL_NONE when out
 * of memory. */
static uint32_t stack_path(fl_tree *t, const sm_model *m, uint32_t stack, unsigned flags)
{
    int depth = stack ? sm_frame_get(m, stack, -1, &(sm_frame_info){0}) : 0;
    if (!depth)
        return child(t, 0, stack ? "(stack not in the file)" : "(no stack recorded)");
    int skip = sm_runtime_frames(sm_labels_of(m), stack);
    if (skip >= depth)
        skip = 0;
    /* the frames to draw, outermost first */
    int *fr = malloc((size_t)depth * sizeof *fr), n = 0;
    if (!fr)
        return FL_NONE;
    for (int i = depth - 1; i >= skip; i--) {
        if ((flags & FL_FOLD_PASSES) && i > skip &&
            sm_frame_passes(sm_labels_of(m), stack, i)) {
            t->passes_folded++;
            continue;
        }
        fr[n++] = i;
    }
    if (n > t->deepest)
        t->deepest = n;
    int keep_out = n, keep_in = 0;
    if (n > FL_MAX_DEPTH) {
        keep_out = FL_MAX_DEPTH / 2;
        keep_in = FL_MAX_DEPTH / 2 - 1;
        t->deep_stacks++;
    }
    uint32_t p = 0;
    char name[512];
    for (int k = 0; k < n && p != FL_NONE; k++) {
        if (k == keep_out && keep_in) {
            snprintf(name, sizeof name, "(%d frames)", n - keep_out - keep_in);
            p = child(t, p, name);
            k = n - keep_in - 1;
            continue;
        }
        frame_name(m, stack, fr[k], name, sizeof name);
        p = child(t, p, name);
    }
    free(fr);
    return p;
}

int fl_pool_parse(const char *s, fl_pool *p)
{
    memset(p, 0, sizeof *p);
    static const struct { const char *name; int kind; } kinds[] = {
        {"default", AN_POOL_DEFAULT}, {"graph", AN_POOL_GRAPH}, {"mempool", AN_POOL_MEMPOOL},
        {"private", AN_POOL_KINDS}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(s, kinds[i].name)) {
            p->kind = kinds[i].kind;
            return 0;
        }
    char *end;
    p->kind = -1;
    if (*s < '0' || *s > '9')
        return -1;
    unsigned long long a = strtoull(s, &end, 10);
    if (*end == ',') {
        const char *b = end + 1;
        if (*b < '0' || *b > '9')
            return -1;
        unsigned long long v = strtoull(b, &end, 10);
        if (*end)
            return -1;
        p->pair[0] = a;
        p->pair[1] = v;
        p->has_pair = 1;
        return 0;
    }
    if (*end)
        return -1;
    p->id = a;
    return 0;
}

/* Whether block o is in pool p. */
static int in_pool(const an_file *f, const msnap_obj *o, const fl_pool *p)
{
    if (o->kind != MSNAP_A_BLOCK_ALLOC)
        return 0;
    uint32_t i = an_obj_pool(f, o);
    if (p->kind == AN_POOL_KINDS)
        return i != 0;
    if (p->kind >= 0)
        return an_pool_kind(f, i) == p->kind;
    uint64_t id = i ? f->pools[i - 1].id : 0;
    if (!p->has_pair)
        return id == p->id;
    uint64_t pair[2];
    an_pool_torch_id(f, id, pair);
    return pair[0] == p->pair[0] && pair[1] == p->pair[1];
}

int fl_add_model(fl_tree *t, const sm_model *m, int layer, int dev, int vs, unsigned flags,
                 uint64_t *t_ns)
{
    return fl_add_model_pool(t, m, layer, dev, vs, flags, NULL, t_ns);
}

int fl_add_model_pool(fl_tree *t, const sm_model *m, int layer, int dev, int vs, unsigned flags,
                      const fl_pool *pool, uint64_t *t_ns)
{
    msnap_obj *objs;
    size_t n;
    if (sm_capture_objects(m, &objs, &n, t_ns))
        return -1;
    int rc = 0;
    u64map leaf = {0};              /* stack -> its leaf node */
    uint64_t *own = NULL;           /* bytes whose path ends at each node */
    size_t cap_own = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        const msnap_obj *o = &objs[k];
        if (!msnap_state_counts_in(o->kind, o->device, layer) || (dev >= 0 && o->device != dev))
            continue;
        if (pool && !in_pool(sm_file(m), o, pool))
            continue;
        uint64_t *v = u64map_get(&leaf, 1, o->stack);
        uint32_t p;
        if (v) {
            p = (uint32_t)*v;
        } else {
            p = stack_path(t, m, o->stack, flags);
            if (p == FL_NONE || u64map_put(&leaf, 1, o->stack, p)) {
                rc = -1;
                break;
            }
        }
        if (p >= cap_own) {
            size_t nc = t->cap > p + 1 ? t->cap : p + 1;
            uint64_t *no = realloc(own, nc * sizeof *no);
            if (!no) {
                rc = -1;
                break;
            }
            memset(no + cap_own, 0, (nc - cap_own) * sizeof *no);
            own = no;
            cap_own = nc;
        }
        own[p] = msnap_add_sat(own[p], o->size);
    }
    /* the bytes go to every node on their path, the root included: a
     * parent is made before its children, so one pass from the last node
     * to the first sums each subtree */
    for (size_t i = t->nn; !rc && i-- > 0;) {
        uint64_t b = i < cap_own ? own[i] : 0;
        if (!b)
            continue;
        if (vs)
            t->n[i].vs = msnap_add_sat(t->n[i].vs, b);
        else
            t->n[i].bytes = msnap_add_sat(t->n[i].bytes, b);
        if (i && t->n[i].parent != FL_NONE) {
            uint32_t q = t->n[i].parent;
            if (q < cap_own)
                own[q] = msnap_add_sat(own[q], b);
        }
    }
    if (vs)
        t->has_vs = 1;
    u64map_free(&leaf);
    free(own);
    free(objs);
    return rc ? -1 : 0;
}

/* Sorts the sibling list starting at *head by name (insertion: lists are
 * short). */
static void sort_children(fl_tree *t, uint32_t p)
{
    uint32_t sorted = FL_NONE;
    for (uint32_t c = t->n[p].first; c != FL_NONE;) {
        uint32_t next = t->n[c].next;
        uint32_t *at = &sorted;
        while (*at != FL_NONE && strcmp(t->n[*at].name, t->n[c].name) < 0)
            at = &t->n[*at].next;
        t->n[c].next = *at;
        *at = c;
        c = next;
    }
    t->n[p].first = sorted;
}

void fl_finish(fl_tree *t)
{
    for (size_t i = 0; i < t->nn; i++)
        sort_children(t, (uint32_t)i);
}

uint64_t fl_vs_undrawn(const fl_tree *t, size_t *frames)
{
    uint64_t b = 0;
    size_t k = 0;
    if (t->nn && !t->n[0].bytes) {
        b = t->n[0].vs;
        k = b ? 1 : 0;
    } else {
        for (size_t i = 1; i < t->nn; i++)
            if (!t->n[i].bytes && t->n[i].vs && t->n[t->n[i].parent].bytes) {
                b += t->n[i].vs;
                k++;
            }
    }
    if (frames)
        *frames = k;
    return b;
}
