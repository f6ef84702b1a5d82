/* tree.c: the free trees.  Each (owner, pool) keeps its FREE blocks in a
 * treap ordered by (size, segment creation number, address): the best fit
 * for n bytes is the lower bound of n, ties go to the oldest segment and the
 * lowest address, and none of it depends on where the driver placed a
 * segment (the segment number, not the address, orders segments), so runs
 * are reproducible.  Priorities come from a per-allocator xorshift sequence,
 * also deterministic.  Expected O(log n) insert, remove, lower bound.
 */
#include "internal.h"

int ms_block_less(const ms_block *x, const ms_block *y)
{
    if (x->size != y->size)
        return x->size < y->size;
    if (x->seg->seq != y->seg->seq)
        return x->seg->seq < y->seg->seq;
    return x->addr < y->addr;
}

static ms_block *ms_rotate_right(ms_block *t)
{
    ms_block *l = t->left;
    t->left = l->right;
    l->right = t;
    return l;
}

static ms_block *ms_rotate_left(ms_block *t)
{
    ms_block *r = t->right;
    t->right = r->left;
    r->left = t;
    return r;
}

static ms_block *ms_insert(ms_block *t, ms_block *b)
{
    if (!t)
        return b;
    if (ms_block_less(b, t)) {
        t->left = ms_insert(t->left, b);
        if (t->left->prio > t->prio)
            t = ms_rotate_right(t);
    } else {
        t->right = ms_insert(t->right, b);
        if (t->right->prio > t->prio)
            t = ms_rotate_left(t);
    }
    return t;
}

void ms_tree_insert(ms_block **root, ms_block *b)
{
    b->left = b->right = NULL;
    *root = ms_insert(*root, b);
}

void ms_tree_remove(ms_block **root, ms_block *b)
{
    ms_block **link = root;
    while (*link && *link != b)
        link = ms_block_less(b, *link) ? &(*link)->left : &(*link)->right;
    if (!*link)
        return; /* not present: the caller's bug; check.c reports it */
    /* Rotate b down until it has at most one child, then splice it out. */
    for (;;) {
        ms_block *t = *link;
        if (!t->left) {
            *link = t->right;
            break;
        }
        if (!t->right) {
            *link = t->left;
            break;
        }
        if (t->left->prio > t->right->prio) {
            *link = ms_rotate_right(t);
            link = &(*link)->right;
        } else {
            *link = ms_rotate_left(t);
            link = &(*link)->left;
        }
    }
    b->left = b->right = NULL;
}

ms_block *ms_tree_lower_bound(ms_block *t, uint64_t size)
{
    ms_block *best = NULL;
    while (t) {
        if (t->size >= size) {
            best = t;
            t = t->left;
        } else {
            t = t->right;
        }
    }
    return best;
}

ms_block *ms_tree_max(ms_block *t)
{
    if (!t)
        return NULL;
    while (t->right)
        t = t->right;
    return t;
}

int ms_tree_contains(ms_block *t, const ms_block *b)
{
    while (t && t != b)
        t = ms_block_less(b, t) ? t->left : t->right;
    return t == b;
}
