/* readahead: the reader on a thread of its own (readahead.h).
 *
 * A ring of NBATCH batches.  The thread fills the batch at `fill` and
 * marks it full; the reader of the batches takes the one at `take` and,
 * when it moves past it, marks it free again.  One mutex and two
 * condition variables; a hand-over per BATCH records, so their cost
 * vanishes against the parsing.  The thread stops at the end of the input,
 * at an error (the batch then carries the message), or when ra_close
 * asks it to.
 */
#include "readahead.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 4096
#define NBATCH 4
#define ARENA_BLOCK ((size_t)256 << 10)

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    char b[];
} arena_block;

/* One record of a batch: an event in place (the bulk), anything else as
 * its union member copied into the arena (a msnap_record is mostly its
 * header member, far larger than an event). */
typedef struct ra_slot {
    uint32_t type;
    uint64_t line;
    const char *text;         /* in the arena; NULL unless ra_open asked */
    size_t text_len;
    union {
        msnap_event e;
        const void *other;
    } u;
} ra_slot;

typedef struct ra_batch {
    ra_slot rec[BATCH];
    size_t n;
    int last;                 /* the last batch: 0 end, -1 error */
    int full;
    arena_block *arena;       /* the strings and ips the records point to */
} ra_batch;

struct ra_reader {
    msnap_reader *in;
    int text;                 /* keep every line's text (ra_open) */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_full, cv_free;
    int stop;                 /* ra_close asked the thread to stop */
    ra_batch batch[NBATCH];
    unsigned fill, take;      /* batch indexes (mod NBATCH) */
    size_t pos;               /* next record in batch[take] */
    msnap_record cur;         /* the record ra_next hands out */
    msnap_record tmp;         /* the thread's record being read */
    int done;                 /* 1 end, -1 error (the reader's view) */
    int truncated;
    char err[512];
};

/* Copies n bytes into the batch's arena; NULL when out of memory. */
static void *arena_put(ra_batch *b, const void *p, size_t n)
{
    arena_block *a = b->arena;
    if (!a || a->used + n > a->cap) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        nb->next = a;
        b->arena = a = nb;
    }
    void *d = a->b + a->used;
    memcpy(d, p, n);
    a->used += (n + 7) & ~(size_t)7;
    if (a->used > a->cap)
        a->used = a->cap;
    return d;
}

static const char *arena_str(ra_batch *b, const char *s, int *oom)
{
    if (!s)
        return NULL;
    const char *d = arena_put(b, s, strlen(s) + 1);
    *oom |= !d;
    return d;
}

/* Empties the arena for reuse (its first block kept). */
static void arena_reset(ra_batch *b)
{
    arena_block *a = b->arena;
    if (!a)
        return;
    arena_block *n = a->next;
    a->next = NULL;
    a->used = 0;
    while (n) {
        arena_block *x = n->next;
        free(n);
        n = x;
    }
}

/* Bytes of the union member of a record type. */
static size_t member_size(int type)
{
    const msnap_record *r = NULL;
    switch (type) {
    case MSNAP_REC_HEADER: return sizeof r->u.header;
    case MSNAP_REC_DEVICE: return sizeof r->u.device;
    case MSNAP_REC_EVENT: return sizeof r->u.event;
    case MSNAP_REC_STACK: return sizeof r->u.stack;
    case MSNAP_REC_MODULE: return sizeof r->u.module;
    case MSNAP_REC_SYMBOL: return sizeof r->u.symbol;
    case MSNAP_REC_STR: return sizeof r->u.str;
    case MSNAP_REC_COUNTERS: return sizeof r->u.counters;
    case MSNAP_REC_STATE_BEGIN: return sizeof r->u.state_begin;
    case MSNAP_REC_LIVE: return sizeof r->u.live;
    case MSNAP_REC_TRAILER: return sizeof r->u.trailer;
    default: return 0;
    }
}

/* Puts record r into slot x of the batch, with what it points to copied
 * into the batch's arena.  0, -1 no memory. */
static int keep(ra_batch *b, msnap_record *r, ra_slot *x, int text)
{
    int oom = 0;
    x->type = r->type;
    x->line = r->line;
    x->text = NULL;
    x->text_len = 0;
    if (text) {
        x->text = arena_put(b, r->text, r->text_len + 1);
        x->text_len = r->text_len;
        if (!x->text)
            return -1;
    }
    if (r->type == MSNAP_REC_EVENT) {
        x->u.e = r->u.event;
        return 0;
    }
    switch (r->type) {
    case MSNAP_REC_STACK:
        if (r->u.stack.depth > 0) {
            r->u.stack.ips = arena_put(b, r->u.stack.ips,
                                       (size_t)r->u.stack.depth * sizeof *r->u.stack.ips);
            oom |= !r->u.stack.ips;
        }
        break;
    case MSNAP_REC_MODULE:
        r->u.module.path = arena_str(b, r->u.module.path, &oom);
        r->u.module.build_id = arena_str(b, r->u.module.build_id, &oom);
        break;
    case MSNAP_REC_SYMBOL:
        r->u.symbol.function = arena_str(b, r->u.symbol.function, &oom);
        r->u.symbol.file = arena_str(b, r->u.symbol.file, &oom);
        break;
    case MSNAP_REC_STR:
        r->u.str.s = arena_str(b, r->u.str.s, &oom);
        break;
    case MSNAP_REC_TRAILER:
        r->u.trailer.reason = arena_str(b, r->u.trailer.reason, &oom);
        break;
    case MSNAP_REC_OTHER:  /* its text only */
        return 0;
    default:   /* the header's pointers live until close; the rest are values */
        break;
    }
    if (!oom)
        x->u.other = arena_put(b, &r->u, member_size(r->type));
    return oom || !x->u.other ? -1 : 0;
}

static void *reader_thread(void *arg)
{
    ra_reader *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->batch[r->fill].full && !r->stop)
            pthread_cond_wait(&r->cv_free, &r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            return NULL;
        ra_batch *b = &r->batch[r->fill];
        arena_reset(b);
        b->n = 0;
        b->last = 1;
        int rc = 1;
        while (b->n < BATCH && (rc = msnap_reader_next(r->in, &r->tmp)) == 1) {
            if (keep(b, &r->tmp, &b->rec[b->n], r->text)) {
                rc = -1;
                snprintf(r->err, sizeof r->err, "out of memory");
                break;
            }
            b->n++;
        }
        if (rc == 0) {
            b->last = 0;
            r->truncated = msnap_reader_truncated(r->in);
        } else if (rc < 0) {
            b->last = -1;
            if (!r->err[0])
                snprintf(r->err, sizeof r->err, "%s", msnap_reader_error(r->in));
        }
        pthread_mutex_lock(&r->mu);
        b->full = 1;
        r->fill = (r->fill + 1) % NBATCH;
        pthread_cond_signal(&r->cv_full);
        pthread_mutex_unlock(&r->mu);
        if (rc <= 0)
            return NULL;
    }
}

ra_reader *ra_open(const char *path, int text, char *err, size_t errlen)
{
    ra_reader *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(r->in = msnap_reader_open(path, err, errlen))) {
        free(r);
        return NULL;
    }
    r->text = text;
    if (text)
        msnap_reader_keep_unknown(r->in);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_full, NULL);
    pthread_cond_init(&r->cv_free, NULL);
    if (pthread_create(&r->thread, NULL, reader_thread, r)) {
        snprintf(err, errlen, "cannot start the reading thread");
        ra_close(r);
        return NULL;
    }
    r->started = 1;
    return r;
}

int ra_next(ra_reader *r, const msnap_record **rec)
{
    for (;;) {
        if (r->done)
            return r->done > 0 ? 0 : -1;
        ra_batch *b = &r->batch[r->take];
        if (r->pos == 0) {
            pthread_mutex_lock(&r->mu);
            while (!b->full)
                pthread_cond_wait(&r->cv_full, &r->mu);
            pthread_mutex_unlock(&r->mu);
        }
        if (r->pos < b->n) {
            const ra_slot *x = &b->rec[r->pos++];
            r->cur.type = (msnap_rec_type)x->type;
            r->cur.line = x->line;
            r->cur.text = x->text;
            r->cur.text_len = x->text_len;
            if (x->type == MSNAP_REC_EVENT)
                r->cur.u.event = x->u.e;
            else if (member_size((int)x->type))   /* an unknown line has none */
                memcpy(&r->cur.u, x->u.other, member_size((int)x->type));
            *rec = &r->cur;
            return 1;
        }
        if (b->last <= 0) {
            r->done = b->last == 0 ? 1 : -1;
            continue;
        }
        /* this batch is read: give it back */
        pthread_mutex_lock(&r->mu);
        b->full = 0;
        r->take = (r->take + 1) % NBATCH;
        r->pos = 0;
        pthread_cond_signal(&r->cv_free);
        pthread_mutex_unlock(&r->mu);
    }
}

const char *ra_error(const ra_reader *r)
{
    return r->err;
}

int ra_truncated(const ra_reader *r)
{
    return r->truncated;
}

int ra_zstd(const ra_reader *r)
{
    return msnap_reader_is_zstd(r->in);
}

void ra_close(ra_reader *r)
{
    if (!r)
        return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_broadcast(&r->cv_free);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    for (int i = 0; i < NBATCH; i++) {
        arena_reset(&r->batch[i]);
        free(r->batch[i].arena);
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv_full);
    pthread_cond_destroy(&r->cv_free);
    msnap_reader_close(r->in);
    free(r);
}
