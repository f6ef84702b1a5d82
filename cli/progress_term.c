/* progress: the CLI's progress line (progress_term.h has the contract).
 *
 * One line on stderr, redrawn in place with "\r" and cleared with "\r\033[K"
 * (erase to end of line), only when stderr is a terminal: a pipe or a CI
 * log never sees an escape byte.  Rate and ETA are measured from the first
 * report of the current item, so a compare of three files shows each file's
 * own rate.
 */
#include "progress_term.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "memsnap/format.h"

#define SHOW_AFTER_NS 1000000000ull  /* nothing drawn in the first second */
#define REDRAW_NS 200000000ull       /* at most 5 redraws a second */

static struct {
    int on;             /* stderr is a terminal and not --quiet */
    int drawn;          /* a line is on the screen */
    uint64_t t_init;    /* progress_init */
    uint64_t t_item;    /* first report of the current item */
    uint64_t t_draw;    /* last redraw */
    uint64_t done0;     /* done at the item's first report */
    char what[96];      /* current item */
    uint64_t show_after_ns; /* SHOW_AFTER_NS, or MEMSNAP_PROGRESS_AFTER_MS */
} P;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void progress_init(int quiet)
{
    const char *term = getenv("TERM");
    memset(&P, 0, sizeof P);
    P.on = !quiet && isatty(2) && !(term && !strcmp(term, "dumb"));
    P.t_init = now_ns();
    /* tests set the delay to 0 so that a small input shows the line */
    const char *after = getenv("MEMSNAP_PROGRESS_AFTER_MS");
    P.show_after_ns = after ? strtoull(after, NULL, 10) * 1000000ull : SHOW_AFTER_NS;
}

int progress_enabled(void)
{
    return P.on;
}

/* A count as text: bytes in KiB/MiB/GiB, items as plain or k/M. */
static void fmt_amount(char *buf, size_t n, double v, int bytes)
{
    if (bytes) {
        if (v >= 1024.0 * 1024 * 1024)
            snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
        else if (v >= 1024.0 * 1024)
            snprintf(buf, n, "%.1f MiB", v / (1024.0 * 1024));
        else
            snprintf(buf, n, "%.0f KiB", v / 1024.0);
    } else if (v >= 1e6) {
        snprintf(buf, n, "%.2fM", v / 1e6);
    } else if (v >= 1e4) {
        snprintf(buf, n, "%.1fk", v / 1e3);
    } else {
        snprintf(buf, n, "%.0f", v);
    }
}

void progress_clear(void)
{
    if (P.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        P.drawn = 0;
    }
}

void progress_update(const char *what, uint64_t done, uint64_t total, int bytes)
{
    if (!P.on)
        return;
    uint64_t t = now_ns();
    if (strncmp(P.what, what, sizeof P.what - 1)) {
        snprintf(P.what, sizeof P.what, "%s", what);
        P.t_item = t;
        P.done0 = done;
    }
    if (t - P.t_init < P.show_after_ns || (P.drawn && t - P.t_draw < REDRAW_NS))
        return;
    P.t_draw = t;
    char d[32], tot[32], rate[40] = "", eta[32] = "", pct[16] = "";
    fmt_amount(d, sizeof d, (double)done, bytes);
    tot[0] = 0;
    if (total) {
        fmt_amount(tot, sizeof tot, (double)total, bytes);
        snprintf(pct, sizeof pct, " (%.0f%%)", done >= total ? 100.0 : 100.0 * (double)done / (double)total);
    }
    double secs = (double)(t - P.t_item) / 1e9;
    if (secs > 0.2 && done > P.done0) {
        double r = (double)(done - P.done0) / secs;
        char rb[32];
        fmt_amount(rb, sizeof rb, r, bytes);
        snprintf(rate, sizeof rate, "  %s/s", rb);
        if (total > done)
            snprintf(eta, sizeof eta, "  ETA %.0f s", (double)(total - done) / r + 0.5);
    }
    fprintf(stderr, "\rmemsnap: %s  %s%s%s%s%s%s\033[K", what, d, total ? " / " : "", tot, pct,
            rate, eta);
    fflush(stderr);
    P.drawn = 1;
}

void progress_done(const char *what)
{
    (void)what;
    progress_clear();
    P.what[0] = 0;
}

void progress_hook(void *ctx, const char *what, uint64_t done, uint64_t total, int bytes)
{
    (void)ctx;
    if (done == MSNAP_PROGRESS_END)
        progress_done(what);
    else
        progress_update(what, done, total, bytes);
}
