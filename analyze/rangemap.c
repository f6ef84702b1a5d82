/* The ordered map of address ranges (rangemap.h): a treap over one array
 * of nodes.  Insert walks down by key and rotates the new node up while
 * its priority is higher; remove merges the node's two subtrees in its
 * place.  Both recurse about 2 log2(n) deep (expected).
 */
#include "rangemap.h"

#include <stdlib.h>

#define NODE(m, i) (&(m)->nodes[(i) - 1])

/* Whether node a orders before the key (addr, size, seq): by address,
 * then size, then the newer first. */
static int before(const rm_node *a, uint64_t addr, uint64_t size, uint64_t seq)
{
    if (a->addr != addr)
        return a->addr < addr;
    if (a->size != size)
        return a->size < size;
    return a->seq > seq;
}

static uint32_t next_prio(rangemap *m)
{
    uint32_t x = m->rng ? m->rng : 2463534242u;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return m->rng = x;
}

static uint32_t rot_right(rangemap *m, uint32_t t)
{
    uint32_t l = NODE(m, t)->left;
    NODE(m, t)->left = NODE(m, l)->right;
    NODE(m, l)->right = t;
    return l;
}

static uint32_t rot_left(rangemap *m, uint32_t t)
{
    uint32_t r = NODE(m, t)->right;
    NODE(m, t)->right = NODE(m, r)->left;
    NODE(m, r)->left = t;
    return r;
}

/* Puts node x into the subtree t; returns the subtree's new root. */
static uint32_t insert_at(rangemap *m, uint32_t t, uint32_t x)
{
    if (!t)
        return x;
    const rm_node *n = NODE(m, x);
    if (before(n, NODE(m, t)->addr, NODE(m, t)->size, NODE(m, t)->seq)) {
        NODE(m, t)->left = insert_at(m, NODE(m, t)->left, x);
        if (NODE(m, NODE(m, t)->left)->prio > NODE(m, t)->prio)
            t = rot_right(m, t);
    } else {
        NODE(m, t)->right = insert_at(m, NODE(m, t)->right, x);
        if (NODE(m, NODE(m, t)->right)->prio > NODE(m, t)->prio)
            t = rot_left(m, t);
    }
    return t;
}

int rangemap_insert(rangemap *m, uint64_t addr, uint64_t size, uint64_t val)
{
    uint32_t x;
    if (m->free_head) {
        x = m->free_head;
        m->free_head = NODE(m, x)->left;
    } else {
        if (m->used == m->cap) {
            size_t nc = m->cap ? m->cap * 2 : 256;
            if (nc > UINT32_MAX - 1)
                return -1;
            rm_node *nn = realloc(m->nodes, nc * sizeof *nn);
            if (!nn)
                return -1;
            m->nodes = nn;
            m->cap = nc;
        }
        x = (uint32_t)++m->used;
    }
    *NODE(m, x) = (rm_node){.addr = addr, .size = size, .val = val, .seq = ++m->seq,
                            .prio = next_prio(m)};
    m->root = insert_at(m, m->root, x);
    m->count++;
    return 0;
}

/* The two subtrees a (all before) and b joined; returns the root. */
static uint32_t merge(rangemap *m, uint32_t a, uint32_t b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (NODE(m, a)->prio > NODE(m, b)->prio) {
        NODE(m, a)->right = merge(m, NODE(m, a)->right, b);
        return a;
    }
    NODE(m, b)->left = merge(m, a, NODE(m, b)->left);
    return b;
}

/* Takes node x (in subtree t) out; returns the subtree's new root. */
static uint32_t remove_at(rangemap *m, uint32_t t, uint32_t x)
{
    if (t == x)
        return merge(m, NODE(m, t)->left, NODE(m, t)->right);
    const rm_node *n = NODE(m, x);
    if (before(n, NODE(m, t)->addr, NODE(m, t)->size, NODE(m, t)->seq))
        NODE(m, t)->left = remove_at(m, NODE(m, t)->left, x);
    else
        NODE(m, t)->right = remove_at(m, NODE(m, t)->right, x);
    return t;
}

int rangemap_remove(rangemap *m, uint64_t addr, uint64_t size)
{
    /* the first node not before (addr, size, newest possible) */
    uint32_t t = m->root, found = 0;
    while (t) {
        if (before(NODE(m, t), addr, size, UINT64_MAX)) {
            t = NODE(m, t)->right;
        } else {
            found = t;
            t = NODE(m, t)->left;
        }
    }
    if (!found || NODE(m, found)->addr != addr || NODE(m, found)->size != size)
        return 0;
    m->root = remove_at(m, m->root, found);
    NODE(m, found)->left = m->free_head;
    m->free_head = found;
    m->count--;
    return 1;
}

const rm_node *rangemap_floor(const rangemap *m, uint64_t addr)
{
    uint32_t t = m->root, best = 0;
    while (t) {
        if (NODE(m, t)->addr <= addr) {
            best = t;
            t = NODE(m, t)->right;
        } else {
            t = NODE(m, t)->left;
        }
    }
    return best ? NODE(m, best) : NULL;
}

const rm_node *rangemap_at(const rangemap *m, uint64_t addr)
{
    const rm_node *n = rangemap_floor(m, addr);
    return n && n->addr == addr ? n : NULL;
}

void rangemap_free(rangemap *m)
{
    free(m->nodes);
    *m = (rangemap){0};
}
