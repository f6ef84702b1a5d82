/* torchalloc.c: PyTorch's CUDA caching allocator, emulated (torchalloc.h has
 * the rules in short).
 *
 * Data: every block (allocated, free, or an unmapped stretch of an
 * expandable segment) is a tb, linked to its neighbours in its segment
 * (prev/next).  Each pool (small, large) keeps its free mapped blocks in a
 * treap ordered by (stream, size, address) - the best fit for (stream, n)
 * is the lower bound of (stream, n, 0) - and its unmapped stretches in a
 * second treap ordered by (stream, address).  Allocated blocks are found by
 * address through a u64map.  Segments are not objects of their own: a fixed
 * segment is a chain of blocks with no prev at its head; an expandable
 * segment (tseg) holds its reservation and page size.
 *
 * Accounting follows PyTorch's: reserved is cudaMalloc'ed segments plus
 * mapped pages (total_allocated_memory there), allocated is the sum of the
 * allocated blocks' sizes.  A segment allocation fails when it would take
 * reserved past the device's capacity, or past the allowed maximum when a
 * memory fraction is set (checked against the allocation size, as PyTorch
 * does, also for expandable segments).
 */
#include "torchalloc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/u64map.h"

#define KMIN 512ull                  /* every size is a multiple of it */
#define KSMALL (1ull << 20)          /* largest small request */
#define KSMALLBUF (2ull << 20)       /* small segment, small expandable page */
#define KLARGEBUF (20ull << 20)      /* 1..10 MiB segment, large expandable page */
#define KMINLARGE (10ull << 20)      /* above it: the request rounded to 2 MiB */
#define KROUNDLARGE (2ull << 20)
#define MiB (1ull << 20)

typedef struct tseg tseg;
typedef struct tpool tpool;

typedef struct tb {
    uint64_t ptr, size, stream;
    uint64_t gc_base;            /* pool's get-free-block count when cached */
    struct tb *prev, *next;      /* neighbours in the segment */
    struct tb *l, *r;            /* treap children (blocks or unmapped) */
    uint32_t prio;
    tpool *pool;
    tseg *es;                    /* expandable segment, or NULL */
    uint8_t allocated, mapped;
} tb;

struct tseg {
    uint64_t base, size, page;
    uint64_t stream;
};

struct tpool {
    tb *blocks;                  /* free mapped blocks: (stream, size, ptr) */
    tb *unmapped;                /* unmapped stretches: (stream, ptr) */
    int small;
    uint64_t gc_calls;           /* get_free_block calls, when gc is on */
};

/* A private pool (PyTorch's PrivatePool): a graph's, a shared
 * graph_pool_handle()'s, a MemPool's.  Its blocks come only from its own
 * segments, and its cached blocks go back to the driver only once it is
 * freeable (its graphs are gone: PyTorch's use_count 0). */
typedef struct tprivate {
    uint64_t id;
    tpool small, large;
    int freeable;
} tprivate;

struct ta_alloc {
    ta_config c;
    uint64_t total, allowed;     /* capacity; fraction * the device (0 = unset) */
    uint64_t device_total;       /* the device's memory (an expandable
                                    segment reserves address space for it) */
    uint64_t next_addr;          /* expandable reservations, upward */
    uint64_t top_addr;           /* fixed segments, downward from here */
    uint32_t seed;
    tpool small, large;          /* the default pool */
    tprivate **priv;             /* private pools, in the order first used */
    size_t npriv, cappriv;
    u64map priv_ix;              /* pool id -> index into priv */
    u64map live;                 /* ptr -> tb* of allocated blocks */
    tseg **segs;                 /* live expandable segments */
    size_t nsegs, capsegs;
    ta_seg_fn seg_fn;
    void *seg_ctx;
    ta_stats st;
};

/* ---- config ---------------------------------------------------------------- */

void ta_config_default(ta_config *c)
{
    memset(c, 0, sizeof *c);
    c->max_split = UINT64_MAX;
    c->max_nonsplit_round = KLARGEBUF;
}

static int parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "True") || !strcmp(v, "true") || !strcmp(v, "1")) {
        *out = 1;
        return 0;
    }
    if (!strcmp(v, "False") || !strcmp(v, "false") || !strcmp(v, "0")) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int parse_u64(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*v || *v == '-')
        return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end)
        return -1;
    *out = x;
    return 0;
}

static int parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x == x))
        return -1;
    *out = x;
    return 0;
}

int ta_config_parse(ta_config *c, const char *s, char *err, size_t errlen)
{
    char buf[1024];
    if (strlen(s) >= sizeof buf) {
        snprintf(err, errlen, "allocator config too long");
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        while (*kv == ' ')
            kv++;
        if (!*kv)
            continue;
        char *v = strchr(kv, ':');
        if (!v) {
            snprintf(err, errlen, "\"%s\" is not key:value", kv);
            return -1;
        }
        *v++ = 0;
        uint64_t u;
        double d;
        if (!strcmp(kv, "expandable_segments")) {
            if (parse_bool(v, &c->expandable))
                goto bad;
        } else if (!strcmp(kv, "max_split_size_mb")) {
            /* PyTorch refuses values that would split below a large segment */
            if (parse_u64(v, &u) || u <= KLARGEBUF / MiB || u > (UINT64_MAX >> 20)) {
                snprintf(err, errlen, "max_split_size_mb:%s: must be a whole number above %llu", v,
                         (unsigned long long)(KLARGEBUF / MiB));
                return -1;
            }
            c->max_split = u * MiB;
        } else if (!strcmp(kv, "max_non_split_rounding_mb")) {
            if (parse_u64(v, &u) || u > (UINT64_MAX >> 20))
                goto bad;
            c->max_nonsplit_round = u * MiB;
        } else if (!strcmp(kv, "roundup_power2_divisions")) {
            if (*v == '[') {
                snprintf(err, errlen, "roundup_power2_divisions:%s: replay takes one number "
                                      "for every size, not a list", v);
                return -1;
            }
            if (parse_u64(v, &u) || u > 1024 || (u & (u - 1))) {
                snprintf(err, errlen, "roundup_power2_divisions:%s: must be 0 or a power of two "
                                      "up to 1024", v);
                return -1;
            }
            for (int i = 0; i < TA_DIV_INTERVALS; i++)
                c->div[i] = (uint32_t)u;
        } else if (!strcmp(kv, "garbage_collection_threshold")) {
            if (parse_double(v, &d) || !(d > 0.0 && d < 1.0)) {
                snprintf(err, errlen, "garbage_collection_threshold:%s: must be in (0, 1)", v);
                return -1;
            }
            c->gc_threshold = d;
        } else if (!strcmp(kv, "memory_fraction")) {
            if (parse_double(v, &d) || !(d > 0.0 && d <= 1.0)) {
                snprintf(err, errlen, "memory_fraction:%s: must be in (0, 1]", v);
                return -1;
            }
            c->fraction = d;
        } else if (!strcmp(kv, "release_lock_on_cudamalloc") || !strcmp(kv, "backend") ||
                   !strncmp(kv, "pinned_", 7) || !strcmp(kv, "expandable_segments_handle_type")) {
            /* no effect on what is reserved */
        } else {
            snprintf(err, errlen, "unknown PyTorch allocator setting \"%s\" (known: "
                                  "expandable_segments, max_split_size_mb, roundup_power2_divisions, "
                                  "garbage_collection_threshold, max_non_split_rounding_mb, "
                                  "memory_fraction)", kv);
            return -1;
        }
        continue;
    bad:
        snprintf(err, errlen, "%s:%s: bad value", kv, v);
        return -1;
    }
    return 0;
}

void ta_config_string(const ta_config *c, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
#define ADD(...)                                                                             \
    do {                                                                                     \
        if (k < n)                                                                           \
            k += (size_t)snprintf(buf + k, n - k, "%s", k ? "," : "");                       \
        if (k < n)                                                                           \
            k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__);                              \
    } while (0)
    if (c->expandable)
        ADD("expandable_segments:True");
    if (c->max_split != UINT64_MAX)
        ADD("max_split_size_mb:%llu", (unsigned long long)(c->max_split / MiB));
    if (c->max_nonsplit_round != KLARGEBUF)
        ADD("max_non_split_rounding_mb:%llu", (unsigned long long)(c->max_nonsplit_round / MiB));
    if (c->div[0])
        ADD("roundup_power2_divisions:%u", c->div[0]);
    if (c->gc_threshold > 0)
        ADD("garbage_collection_threshold:%g", c->gc_threshold);
#undef ADD
}

/* ---- rounding ---------------------------------------------------------------- */

static int log2_floor(uint64_t x)
{
    return 63 - __builtin_clzll(x);
}

static uint32_t divisions_for(const ta_config *c, uint64_t size)
{
    int lg = log2_floor(size), start = 20; /* intervals start at 1 MiB */
    int i = lg > start ? lg - start : 0;
    if (i > TA_DIV_INTERVALS - 1)
        i = TA_DIV_INTERVALS - 1;
    return c->div[i];
}

uint64_t ta_round_size(const ta_config *c, uint64_t size)
{
    if (size < KMIN)
        return KMIN;
    if (size > UINT64_MAX - (KROUNDLARGE << 1))
        return UINT64_MAX & ~(KROUNDLARGE - 1);   /* no wrap to a small size */
    uint32_t div = divisions_for(c, size);
    if (div > 1 && size > KMIN * div) {
        if (!(size & (size - 1)))
            return size;
        uint64_t floor2 = 1ull << log2_floor(size);
        uint64_t step = floor2 >> log2_floor(div);
        if (!step)
            return floor2 << 1;
        uint64_t down = size & ~(step - 1);
        return down == size ? size : down + step;
    }
    return (size + KMIN - 1) / KMIN * KMIN;
}

static uint64_t allocation_size(uint64_t size)
{
    if (size <= KSMALL)
        return KSMALLBUF;
    if (size < KMINLARGE)
        return KLARGEBUF;
    return (size + KROUNDLARGE - 1) / KROUNDLARGE * KROUNDLARGE;
}

/* ---- the two treaps ------------------------------------------------------------ */

/* blocks: (stream, size, ptr); unmapped (by_addr): (stream, ptr) */
static int less(const tb *x, const tb *y, int by_addr)
{
    if (x->stream != y->stream)
        return x->stream < y->stream;
    if (!by_addr && x->size != y->size)
        return x->size < y->size;
    return x->ptr < y->ptr;
}

static tb *tr_merge(tb *a, tb *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (a->prio > b->prio) {
        a->r = tr_merge(a->r, b);
        return a;
    }
    b->l = tr_merge(a, b->l);
    return b;
}

/* Splits t into keys < k (*lo) and >= k (*hi). */
static void tr_split(tb *t, const tb *k, int by_addr, tb **lo, tb **hi)
{
    if (!t) {
        *lo = *hi = NULL;
        return;
    }
    if (less(t, k, by_addr)) {
        tr_split(t->r, k, by_addr, &t->r, hi);
        *lo = t;
    } else {
        tr_split(t->l, k, by_addr, lo, &t->l);
        *hi = t;
    }
}

static void tr_insert(ta_alloc *a, tb **root, tb *n, int by_addr)
{
    a->seed ^= a->seed << 13;
    a->seed ^= a->seed >> 17;
    a->seed ^= a->seed << 5;
    n->prio = a->seed;
    n->l = n->r = NULL;
    tb *lo, *hi;
    tr_split(*root, n, by_addr, &lo, &hi);
    *root = tr_merge(tr_merge(lo, n), hi);
}

static void tr_erase(tb **root, tb *n, int by_addr)
{
    tb **p = root;
    while (*p && *p != n)
        p = less(n, *p, by_addr) ? &(*p)->l : &(*p)->r;
    if (*p)
        *p = tr_merge(n->l, n->r);
    n->l = n->r = NULL;
}

/* The first node >= k (strict: > k), or NULL. */
static tb *tr_lower(tb *t, const tb *k, int by_addr, int strict)
{
    tb *best = NULL;
    while (t) {
        int ge = strict ? less(k, t, by_addr) : !less(t, k, by_addr);
        if (ge) {
            best = t;
            t = t->l;
        } else {
            t = t->r;
        }
    }
    return best;
}

/* The last node < k, or NULL. */
static tb *tr_before(tb *t, const tb *k, int by_addr)
{
    tb *best = NULL;
    while (t) {
        if (less(t, k, by_addr)) {
            best = t;
            t = t->r;
        } else {
            t = t->l;
        }
    }
    return best;
}

/* Appends the nodes of t in order to *v (grown as needed).  -1 out of memory. */
static int tr_collect(tb *t, tb ***v, size_t *n, size_t *cap)
{
    while (t) {
        if (tr_collect(t->l, v, n, cap))
            return -1;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            tb **nv = realloc(*v, nc * sizeof *nv);
            if (!nv)
                return -1;
            *v = nv;
            *cap = nc;
        }
        (*v)[(*n)++] = t;
        t = t->r;
    }
    return 0;
}

/* ---- blocks -------------------------------------------------------------------- */

static tb *block_new(tpool *p, uint64_t ptr, uint64_t size, uint64_t stream, tseg *es)
{
    tb *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->ptr = ptr;
    b->size = size;
    b->stream = stream;
    b->pool = p;
    b->es = es;
    b->mapped = 1;
    return b;
}

static void cache_block(ta_alloc *a, tb *b)
{
    (void)a;
    b->gc_base = b->pool->gc_calls;
    tr_insert(a, &b->pool->blocks, b, 0);
}

static int is_split(const tb *b)
{
    return b->prev || b->next;
}

static void seg_note(ta_alloc *a, int kind, uint64_t addr, uint64_t size, uint64_t stream)
{
    if (a->seg_fn)
        a->seg_fn(a->seg_ctx, kind, addr, size, stream);
}

static void reserved_add(ta_alloc *a, uint64_t n)
{
    a->st.reserved += n;
    if (a->st.reserved > a->st.peak_reserved)
        a->st.peak_reserved = a->st.reserved;
}

/* Merges free neighbour src into dst (same mapping state).  Returns the
 * bytes taken over, 0 when src cannot merge.  src leaves its treap. */
static uint64_t try_merge(tb *dst, tb *src)
{
    if (!src || src->allocated || src->mapped != dst->mapped)
        return 0;
    if (src->mapped)
        tr_erase(&src->pool->blocks, src, 0);
    else
        tr_erase(&src->pool->unmapped, src, 1);
    if (dst->prev == src) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    uint64_t n = src->size;
    dst->size += n;
    free(src);
    return n;
}

/* ---- expandable segments ----------------------------------------------------------- */

static int allocatable(const tb *b)
{
    return b && !b->allocated;
}

/* The lowest-address free or unmapped run of stream's segments with room
 * for size, else a new segment's single unmapped block.  NULL: host OOM. */
static tb *find_expandable(ta_alloc *a, tpool *p, uint64_t stream, uint64_t size)
{
    tb key = {.stream = stream, .ptr = 0};
    for (tb *c = tr_lower(p->unmapped, &key, 1, 0); c && c->stream == stream;
         c = tr_lower(p->unmapped, c, 1, 1)) {
        tb *s = allocatable(c->prev) ? c->prev : c;
        uint64_t bytes = 0;
        for (tb *w = s; bytes < size && allocatable(w); w = w->next)
            bytes += w->size;
        if (bytes >= size)
            return s;
    }
    uint64_t page = p->small ? KSMALLBUF : KLARGEBUF;
    uint64_t want = a->device_total + a->device_total / 8;
    tseg *es = calloc(1, sizeof *es);
    if (!es)
        return NULL;
    if (a->nsegs == a->capsegs) {
        size_t nc = a->capsegs ? a->capsegs * 2 : 8;
        tseg **ns = realloc(a->segs, nc * sizeof *ns);
        if (!ns) {
            free(es);
            return NULL;
        }
        a->segs = ns;
        a->capsegs = nc;
    }
    es->page = page;
    es->size = (want + page - 1) / page * page;
    es->base = a->next_addr;
    es->stream = stream;
    a->next_addr += es->size + KLARGEBUF;
    tb *b = block_new(p, es->base, es->size, stream, es);
    if (!b) {
        free(es);
        return NULL;
    }
    a->segs[a->nsegs++] = es;
    b->mapped = 0;
    tr_insert(a, &p->unmapped, b, 1);
    seg_note(a, TA_SEG_RESERVE, es->base, es->size, stream);
    return b;
}

/* Maps the pages under the first size bytes of unmapped block m; the rest
 * stays unmapped after it.  0, or -1 when the device has no room (nothing
 * changes) or the host is out of memory. */
static int map_block(ta_alloc *a, tb *m, uint64_t size)
{
    tseg *es = m->es;
    uint64_t first = (m->ptr - es->base) / es->page;
    uint64_t last = (m->ptr + size - es->base + es->page - 1) / es->page;
    uint64_t bytes = (last - first) * es->page;
    if (a->st.reserved + bytes > a->total)
        return -1;
    if (bytes < m->size) {
        tb *rest = block_new(m->pool, m->ptr + bytes, m->size - bytes, m->stream, es);
        if (!rest)
            return -1;
        rest->mapped = 0;
        rest->prev = m;
        rest->next = m->next;
        if (m->next)
            m->next->prev = rest;
        m->next = rest;
        tr_erase(&m->pool->unmapped, m, 1);
        m->size = bytes;
        tr_insert(a, &m->pool->unmapped, rest, 1);
    } else {
        tr_erase(&m->pool->unmapped, m, 1);
    }
    m->mapped = 1;
    for (uint64_t i = first; i < last; i++)
        seg_note(a, TA_PAGE_MAP, es->base + i * es->page, es->page, m->stream);
    try_merge(m, m->prev);
    try_merge(m, m->next);
    cache_block(a, m);
    reserved_add(a, bytes);
    a->st.segment_allocs++;
    return 0;
}

static tb *alloc_expandable(ta_alloc *a, tpool *p, uint64_t stream, uint64_t size)
{
    tb *c = find_expandable(a, p, stream, size);
    if (!c)
        return NULL;
    if (!c->mapped && map_block(a, c, c->size < size ? c->size : size))
        return NULL;
    while (c->size < size) {
        tb *n = c->next;
        uint64_t rest = size - c->size;
        if (!n || map_block(a, n, rest < n->size ? rest : n->size))
            return NULL;
        c = n; /* the mapping merged c into n */
    }
    tr_erase(&p->blocks, c, 0);
    return c;
}

/* Unmaps the whole pages inside free block b; partial pages at either end
 * stay as free mapped blocks. */
static void unmap_block(ta_alloc *a, tb *b)
{
    tseg *es = b->es;
    uint64_t first = (b->ptr - es->base + es->page - 1) / es->page;
    uint64_t last = (b->ptr + b->size - es->base) / es->page;
    if (first >= last)
        return;
    tpool *p = b->pool;
    uint64_t lo = es->base + first * es->page, hi = es->base + last * es->page;
    tr_erase(&p->blocks, b, 0);
    if (lo > b->ptr) {
        tb *before = block_new(p, b->ptr, lo - b->ptr, b->stream, es);
        if (before) {
            before->prev = b->prev;
            before->next = b;
            if (b->prev)
                b->prev->next = before;
            b->prev = before;
            cache_block(a, before);
        }
    }
    if (hi < b->ptr + b->size) {
        tb *after = block_new(p, hi, b->ptr + b->size - hi, b->stream, es);
        if (after) {
            after->prev = b;
            after->next = b->next;
            if (b->next)
                b->next->prev = after;
            b->next = after;
            cache_block(a, after);
        }
    }
    b->ptr = lo;
    b->size = hi - lo;
    b->mapped = 0;
    for (uint64_t i = first; i < last; i++)
        seg_note(a, TA_PAGE_UNMAP, es->base + i * es->page, es->page, b->stream);
    try_merge(b, b->prev);
    try_merge(b, b->next);
    tr_insert(a, &p->unmapped, b, 1);
    a->st.reserved -= hi - lo;
    a->st.segment_frees++;
}

static void release_expandable(ta_alloc *a, tb *b)
{
    tseg *es = b->es;
    tr_erase(&b->pool->unmapped, b, 1);
    for (size_t i = 0; i < a->nsegs; i++)
        if (a->segs[i] == es) {
            a->segs[i] = a->segs[--a->nsegs];
            break;
        }
    seg_note(a, TA_SEG_ADDR_FREE, es->base, es->size, es->stream);
    free(es);
    free(b);
}

/* ---- fixed segments and releases ---------------------------------------------------- */

/* cudaFree of a whole cached segment (b has no neighbours). */
static void release_block(ta_alloc *a, tb *b)
{
    tr_erase(&b->pool->blocks, b, 0);
    a->st.reserved -= b->size;
    a->st.segment_frees++;
    seg_note(a, TA_SEG_FREE, b->ptr, b->size, b->stream);
    free(b);
}

static void release_pool(ta_alloc *a, tpool *p)
{
    tb **v = NULL;
    size_t n = 0, cap = 0;
    if (tr_collect(p->blocks, &v, &n, &cap)) {
        free(v);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!v[i]->es && !is_split(v[i])) {
            release_block(a, v[i]);
            v[i] = NULL;
        }
    for (size_t i = 0; i < n; i++) {
        tb *b = v[i];
        if (!b || !b->es)
            continue;
        unmap_block(a, b);
        /* b may have merged away a neighbour; it survives itself */
        if (!b->mapped && !is_split(b))
            release_expandable(a, b);
    }
    free(v);
}

/* PyTorch's release_cached_blocks for the default pool: its unsplit
 * cached segments and free expandable pages, and those of every freeable
 * private pool; a live private pool keeps its cache (its graphs replay into
 * it). */
void ta_empty_cache(ta_alloc *a)
{
    release_pool(a, &a->large);
    release_pool(a, &a->small);
    for (size_t i = 0; i < a->npriv; i++)
        if (a->priv[i]->freeable) {
            release_pool(a, &a->priv[i]->small);
            release_pool(a, &a->priv[i]->large);
        }
}

/* The private pool of id, made on first use.  NULL: out of host memory. */
static tprivate *private_pool(ta_alloc *a, uint64_t id)
{
    uint64_t *v = u64map_get(&a->priv_ix, 0, id);
    if (v)
        return a->priv[*v];
    if (a->npriv == a->cappriv) {
        size_t nc = a->cappriv ? a->cappriv * 2 : 8;
        tprivate **np = realloc(a->priv, nc * sizeof *np);
        if (!np)
            return NULL;
        a->priv = np;
        a->cappriv = nc;
    }
    tprivate *t = calloc(1, sizeof *t);
    if (!t || u64map_put(&a->priv_ix, 0, id, a->npriv)) {
        free(t);
        return NULL;
    }
    t->id = id;
    t->small.small = 1;
    a->priv[a->npriv++] = t;
    return t;
}

int ta_pool_release(ta_alloc *a, uint64_t pool)
{
    if (!pool)
        return 0;
    tprivate *t = private_pool(a, pool);
    if (!t)
        return -1;
    t->freeable = 1;
    return 0;
}

/* Frees oversize cached blocks of the request's stream until size bytes
 * are back (max_split_size set).  1 when it released enough. */
static int release_oversize(ta_alloc *a, tpool *p, uint64_t stream, uint64_t size)
{
    if (a->c.max_split == UINT64_MAX)
        return 0;
    tb key = {.stream = stream, .size = size < a->c.max_split ? a->c.max_split : size, .ptr = 0};
    tb *it = tr_lower(p->blocks, &key, 0, 0);
    if (it && it->stream == stream) {
        if (it->es || is_split(it))
            return 0; /* PyTorch would cudaFree it; only whole segments can go */
        release_block(a, it);
        return 1;
    }
    uint64_t got = 0;
    it = tr_before(p->blocks, &key, 0);
    while (it && got < key.size && it->size >= a->c.max_split && it->stream == stream) {
        tb *prev = tr_before(p->blocks, it, 0);
        if (it->es || is_split(it))
            break;
        got += it->size;
        release_block(a, it);
        it = prev;
    }
    return got >= key.size;
}

/* garbage_collection_threshold: above threshold * allowed, frees unsplit
 * cached large blocks not reused for longer than the average, repeatedly,
 * until enough is back. */
static void garbage_collect(ta_alloc *a)
{
    uint64_t thr = (uint64_t)(a->c.gc_threshold * (double)a->allowed);
    if (a->st.reserved <= thr)
        return;
    uint64_t target = a->st.reserved - thr, got = 0, total_age = 0;
    tpool *p = &a->large;
    tb **v = NULL;
    size_t n = 0, cap = 0, count = 0;
    if (tr_collect(p->blocks, &v, &n, &cap)) {
        free(v);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!is_split(v[i])) {
            total_age += p->gc_calls - v[i]->gc_base;
            count++;
        }
    int freed = 1;
    while (got < target && freed && count > 0) {
        double age_thr = (double)total_age / (double)count;
        freed = 0;
        for (size_t i = 0; i < n; i++) {
            tb *b = v[i];
            if (!b || is_split(b) || b->es)
                continue;
            uint64_t age = p->gc_calls - b->gc_base;
            if ((double)age >= age_thr) {
                freed = 1;
                got += b->size;
                total_age -= age;
                count--;
                a->st.gc_releases++;
                release_block(a, b);
                v[i] = NULL;
            }
        }
    }
    free(v);
}

/* ---- malloc / free ------------------------------------------------------------------ */

/* Best fit of (stream, size) in p, with PyTorch's expandable and oversize
 * rules; the block leaves the treap.  NULL when none fits. */
static tb *get_free_block(ta_alloc *a, tpool *p, uint64_t stream, uint64_t size)
{
    if (a->c.fraction > 0 && a->c.gc_threshold > 0)
        p->gc_calls++;
    tb key = {.stream = stream, .size = size, .ptr = 0};
    tb *it = tr_lower(p->blocks, &key, 0, 0);
    if (!it || it->stream != stream)
        return NULL;
    if (it->es) {
        /* the free block at the end of a segment can grow into the unmapped
         * stretch after it: best fit counts what it can become */
#define GROWN(b) ((b)->size + ((b)->next && !(b)->next->mapped ? (b)->next->size : 0))
        for (tb *n = tr_lower(p->blocks, it, 0, 1); it->es && n && n->stream == stream &&
                                                    GROWN(n) < GROWN(it);
             n = tr_lower(p->blocks, n, 0, 1))
            it = n;
#undef GROWN
    }
    if (size < a->c.max_split && it->size >= a->c.max_split)
        return NULL;
    if (size >= a->c.max_split && it->size >= size + a->c.max_nonsplit_round)
        return NULL;
    tr_erase(&p->blocks, it, 0);
    return it;
}

/* A new segment (or mapped pages) for the request.  NULL when the device
 * or the allowed fraction has no room. */
static tb *alloc_block(ta_alloc *a, tpool *p, uint64_t stream, uint64_t size, uint64_t alloc_size)
{
    if (a->allowed && a->st.reserved + alloc_size > a->allowed)
        return NULL;
    if (a->c.expandable)
        return alloc_expandable(a, p, stream, size);
    if (a->st.reserved + alloc_size > a->total)
        return NULL;
    /* the CUDA driver hands out cudaMalloc ranges from the top of the
     * address space down; best fit breaks ties between equal blocks by
     * address, so the emulation places segments the same way round */
    uint64_t at = a->top_addr - ((alloc_size + KROUNDLARGE - 1) / KROUNDLARGE * KROUNDLARGE + KROUNDLARGE);
    tb *b = block_new(p, at, alloc_size, stream, NULL);
    if (!b)
        return NULL;
    a->top_addr = at;
    reserved_add(a, alloc_size);
    a->st.segment_allocs++;
    seg_note(a, TA_SEG_ALLOC, b->ptr, b->size, stream);
    return b;
}

int ta_malloc(ta_alloc *a, uint64_t req, uint64_t stream, uint64_t *ptr)
{
    return ta_malloc_pool(a, req, stream, 0, ptr);
}

int ta_malloc_pool(ta_alloc *a, uint64_t req, uint64_t stream, uint64_t pool, uint64_t *ptr)
{
    /* more than the device: out of memory, as PyTorch's would be (and the
     * rounding below would wrap past 2^64 for a request near it: a 16 EiB
     * request became a block of 0 bytes) */
    if (req > a->total) {
        a->st.ooms++;
        return TA_OOM;
    }
    uint64_t size = ta_round_size(&a->c, req);
    tpool *p = size <= KSMALL ? &a->small : &a->large;
    if (pool) {
        /* get_pool: a capture (or use_mem_pool) routes the stream's requests
         * to its private pool, small or large as the default pools */
        tprivate *t = private_pool(a, pool);
        if (!t)
            return TA_NOMEM;
        p = size <= KSMALL ? &t->small : &t->large;
    }
    uint64_t alloc_size = allocation_size(size);
    tb *b = get_free_block(a, p, stream, size);
    if (!b) {
        if (a->c.fraction > 0 && a->c.gc_threshold > 0)
            garbage_collect(a);
        b = alloc_block(a, p, stream, size, alloc_size);
        if (!b && release_oversize(a, p, stream, size)) {
            a->st.retries++;
            b = alloc_block(a, p, stream, size, alloc_size);
        }
        /* the last retry frees every unsplit cached block, but only while no
         * capture is under way (PyTorch's captures_underway): a request into
         * a private pool is made during one, and goes out of memory here */
        if (!b && !pool) {
            ta_empty_cache(a);
            a->st.retries++;
            b = alloc_block(a, p, stream, size, alloc_size);
        }
        if (!b) {
            a->st.ooms++;
            return TA_OOM;
        }
    }
    uint64_t rest = b->size - size;
    int split = (p->small || a->c.expandable) ? rest >= KMIN
                                              : size < a->c.max_split && rest > KSMALL;
    if (split) {
        tb *r = block_new(p, b->ptr + size, rest, stream, b->es);
        if (!r)
            return TA_NOMEM;
        r->prev = b;
        r->next = b->next;
        if (b->next)
            b->next->prev = r;
        b->next = r;
        b->size = size;
        cache_block(a, r);
    }
    b->allocated = 1;
    b->stream = stream;
    if (u64map_put(&a->live, 0, b->ptr, (uint64_t)(uintptr_t)b))
        return TA_NOMEM;
    a->st.allocated += b->size;
    if (a->st.allocated > a->st.peak_allocated)
        a->st.peak_allocated = a->st.allocated;
    *ptr = b->ptr;
    return TA_OK;
}

int ta_free(ta_alloc *a, uint64_t ptr)
{
    uint64_t v;
    if (!u64map_del(&a->live, 0, ptr, &v))
        return -1;
    tb *b = (tb *)(uintptr_t)v;
    b->allocated = 0;
    a->st.allocated -= b->size;
    try_merge(b, b->prev);
    try_merge(b, b->next);
    cache_block(a, b);
    return 0;
}

/* ---- life cycle and stats ------------------------------------------------------------- */

ta_alloc *ta_create(const ta_config *c, uint64_t device_total, uint64_t capacity, uint64_t base,
                    ta_seg_fn seg, void *ctx)
{
    ta_alloc *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->c = *c;
    a->total = capacity < device_total ? capacity : device_total;
    a->device_total = device_total;
    a->allowed = c->fraction > 0 ? (uint64_t)(c->fraction * (double)device_total) : 0;
    a->next_addr = base;
    a->top_addr = base + (1ull << 43);
    a->seed = 0x9e3779b9u;
    a->small.small = 1;
    a->seg_fn = seg;
    a->seg_ctx = ctx;
    return a;
}

static void free_tree(tb *t)
{
    while (t) {
        free_tree(t->l);
        tb *r = t->r;
        free(t);
        t = r;
    }
}

void ta_destroy(ta_alloc *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->live.cap; i++)
        if (a->live.slots && a->live.slots[i].used)
            free((tb *)(uintptr_t)a->live.slots[i].value);
    u64map_free(&a->live);
    free_tree(a->small.blocks);
    free_tree(a->small.unmapped);
    free_tree(a->large.blocks);
    free_tree(a->large.unmapped);
    for (size_t i = 0; i < a->npriv; i++) {
        free_tree(a->priv[i]->small.blocks);
        free_tree(a->priv[i]->small.unmapped);
        free_tree(a->priv[i]->large.blocks);
        free_tree(a->priv[i]->large.unmapped);
        free(a->priv[i]);
    }
    free(a->priv);
    u64map_free(&a->priv_ix);
    for (size_t i = 0; i < a->nsegs; i++)
        free(a->segs[i]);
    free(a->segs);
    free(a);
}

static uint64_t tree_max_size(const tb *t)
{
    uint64_t m = 0;
    while (t) {
        uint64_t l = tree_max_size(t->l);
        if (l > m)
            m = l;
        if (t->size > m)
            m = t->size;
        t = t->r;
    }
    return m;
}

void ta_stats_get_counters(ta_alloc *a, ta_stats *s)
{
    *s = a->st;
    uint64_t cap = a->allowed && a->allowed < a->total ? a->allowed : a->total;
    s->device_free = cap > a->st.reserved ? cap - a->st.reserved : 0;
}

void ta_stats_get(ta_alloc *a, ta_stats *s)
{
    *s = a->st;
    uint64_t l = tree_max_size(a->large.blocks), m = tree_max_size(a->small.blocks);
    s->largest_free = l > m ? l : m;
    /* a private pool's cached blocks serve only its own requests: not in
     * the default pool's largest free block */
    uint64_t cap = a->allowed && a->allowed < a->total ? a->allowed : a->total;
    s->device_free = cap > a->st.reserved ? cap - a->st.reserved : 0;
}
