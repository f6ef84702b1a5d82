/* The flame graph's tree (flame.h). */
#include "flame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

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
    if (sm_grow((void **)&t->n, &t->cap, t->nn, sizeof *t->n))
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

int fl_add_model(fl_tree *t, const sm_model *m, int layer, int dev, int vs, uint64_t *t_ns)
{
    msnap_obj *objs;
    size_t n;
    if (sm_capture_objects(m, &objs, &n, t_ns))
        return -1;
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        const msnap_obj *o = &objs[k];
        if (!msnap_state_counts_in(o->kind, o->device, layer) || (dev >= 0 && o->device != dev))
            continue;
        uint32_t p = 0;
        int depth = o->stack ? sm_frame_get(m, o->stack, -1, &(sm_frame_info){0}) : 0;
        int skip = o->stack ? sm_runtime_frames(m, o->stack) : 0;
        if (skip >= depth)
            skip = 0;
        char name[512];
        if (!depth) {
            p = child(t, 0, o->stack ? "(stack not in the file)" : "(no stack recorded)");
            rc = p == FL_NONE;
        }
        for (int i = depth - 1; i >= skip && !rc; i--) {
            frame_name(m, o->stack, i, name, sizeof name);
            if ((p = child(t, p, name)) == FL_NONE)
                rc = -1;
        }
        if (rc)
            break;
        /* the bytes go to every node on the path, the root included */
        for (uint32_t q = p;; q = t->n[q].parent) {
            if (vs)
                t->n[q].vs += o->size;
            else
                t->n[q].bytes += o->size;
            if (q == 0)
                break;
        }
    }
    if (vs)
        t->has_vs = 1;
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
