/* Several snapshots read on several threads, taken in file order
 * (parallel.h).
 *
 * One mutex and one condition variable: workers take the next index while
 * it is within the window ahead of the one being taken, and mark it done;
 * the calling thread waits for its index to be done, takes it, and moves
 * the window on.  A take that fails sets stop: no worker starts another
 * index, the ones running finish, and every thread is joined before
 * par_run returns.
 */
#define _GNU_SOURCE   /* sched_getaffinity */
#include "parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memsnap/format.h"
#include "options.h"
#include "progress_term.h"

typedef struct par {
    int n, window;
    int (*work)(void *ctx, int i);
    void *ctx;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int next, taken, stop;
    unsigned char *done;
    int *rc;
} par;

static void *worker(void *arg)
{
    par *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->next < p->n && p->next >= p->taken + p->window)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop || p->next >= p->n)
            break;
        int i = p->next++;
        pthread_mutex_unlock(&p->mu);
        int rc = p->work(p->ctx, i);
        pthread_mutex_lock(&p->mu);
        p->rc[i] = rc;
        p->done[i] = 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- one progress line for all the files ---------------------------------- */

static _Atomic uint64_t prog_done;        /* bytes read, all files */
static uint64_t prog_total;               /* their sizes (0: unknown) */
static int prog_files;
static pthread_mutex_t prog_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread uint64_t prog_last;       /* this thread's file so far */

static void sum_hook(void *ctx, const char *what, uint64_t done, uint64_t total, int bytes)
{
    (void)ctx, (void)what, (void)total;
    if (!bytes)
        return;
    if (done == MSNAP_PROGRESS_END) {
        prog_last = 0;
        return;
    }
    uint64_t all = atomic_fetch_add(&prog_done, done - prog_last) + (done - prog_last);
    prog_last = done;
    char item[64];
    snprintf(item, sizeof item, "reading %d files", prog_files);
    if (pthread_mutex_trylock(&prog_mu) == 0) {   /* a line at a time; skip when busy */
        progress_update(item, all, prog_total, 1);
        pthread_mutex_unlock(&prog_mu);
    }
}

int par_run(int n, int jobs, int (*work)(void *ctx, int i),
            int (*take)(void *ctx, int i, int rc), void *ctx, char **paths)
{
    if (jobs > n)
        jobs = n;
    if (jobs <= 1) {
        for (int i = 0; i < n; i++) {
            int r = take(ctx, i, work(ctx, i));
            if (r)
                return r;
        }
        return 0;
    }
    par p = {.n = n, .window = 2 * jobs, .work = work, .ctx = ctx};
    p.done = calloc((size_t)n, 1);
    p.rc = calloc((size_t)n, sizeof *p.rc);
    pthread_t *th = calloc((size_t)jobs, sizeof *th);
    if (!p.done || !p.rc || !th) {
        free(p.done);
        free(p.rc);
        free(th);
        fprintf(stderr, "memsnap: out of memory\n");
        return 2;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int summed = progress_enabled();
    if (summed) {
        prog_done = 0;
        prog_total = 0;
        prog_files = n;
        for (int i = 0; i < n; i++) {
            struct stat st;
            if (strcmp(paths[i], "-") && stat(paths[i], &st) == 0)
                prog_total += (uint64_t)st.st_size;
        }
        msnap_set_progress(sum_hook, NULL);
    }
    int started = 0, result = 0;
    for (; started < jobs; started++)
        if (pthread_create(&th[started], NULL, worker, &p))
            break;
    if (!started) {
        /* no thread could be made: this one does the work */
        pthread_mutex_lock(&p.mu);
        p.stop = 1;
        pthread_mutex_unlock(&p.mu);
        for (int i = 0; i < n && !result; i++)
            result = take(ctx, i, work(ctx, i));
    }
    for (int i = 0; i < n && started; i++) {
        pthread_mutex_lock(&p.mu);
        while (!p.done[i])
            pthread_cond_wait(&p.cv, &p.mu);
        pthread_mutex_unlock(&p.mu);
        if (summed) {
            /* before anything is printed; redrawn later */
            pthread_mutex_lock(&prog_mu);
            progress_clear();
            pthread_mutex_unlock(&prog_mu);
        }
        int r = take(ctx, i, p.rc[i]);
        pthread_mutex_lock(&p.mu);
        p.taken = i + 1;
        if (r)
            p.stop = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
        if (r) {
            result = r;
            break;
        }
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (summed) {
        progress_clear();         /* the workers are gone: no lock needed */
        msnap_set_progress(progress_hook, NULL);
    }
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    free(p.done);
    free(p.rc);
    free(th);
    return result;
}

int par_default_jobs(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int par_parse_jobs(const char *sub, const char *arg, int *jobs)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < 1 || v > 1024)
        return cli_usage_error(sub, "-j wants a count of threads from 1 to 1024, got \"%s\"", arg);
    *jobs = (int)v;
    return 0;
}
