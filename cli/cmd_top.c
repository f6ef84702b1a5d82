/* memsnap top: a terminal view of a recording as it is being written,
 * refreshed every second; re-attaching is running it again.
 *
 * This file parses the arguments, draws and reads keys; what is shown is
 * analyze/live.h's view (the source found from the path: a stream being
 * written, followed; a ring-mode run's live file; a finished file, at its
 * end or --at TIME), the same the metrics of `memsnap run --metrics` are
 * made of.
 *
 * The terminal: the alternate screen, the cursor hidden, keys read one at a
 * time without echo (termios), the whole frame redrawn at each refresh and
 * at a resize (SIGWINCH); the terminal is put back at q, at SIGINT, SIGTERM
 * and SIGHUP, and before an error line.  --once prints one frame on stdout
 * instead (lines not cut), for scripts and tests.
 *
 * Exit status: 0 ok, 2 bad usage or unreadable input (one line on stderr).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "analyze/live.h"
#include "format/state.h"
#include "memsnap/format.h"
#include "options.h"
#include "util/human.h"

static const char top_usage[] =
    "usage: memsnap top SNAP [--interval S] [--once] [--at TIME] [--device N]\n"
    "                   [--top N] [--category-rules FILE]\n"
    "\n"
    "A terminal view of a recording while it is written, refreshed every\n"
    "second: per device reserved and allocated now with their peaks and a\n"
    "sparkline of the last minutes, free inside reserved and the largest free\n"
    "block, the headroom to the device, OOMs so far, the top live sites with\n"
    "their trend over the last minute, the floor (the total at the first and\n"
    "the latest valley) and, for a PyTorch program, the categories.  Run it\n"
    "again to re-attach.\n"
    "\n"
    "SNAP is the snapshot path given to memsnap run -o (or memsnap.record):\n"
    "a stream recording is read from its start to where it has got to and\n"
    "followed as it grows; a ring-mode run, which writes nothing until a\n"
    "dump, is asked for SNAP.live (its recorder writes it once a second while\n"
    "someone watches); a finished file is shown at its end, or at --at TIME.\n"
    "\n"
    "options:\n"
    "      --interval S       seconds between refreshes, 0.1 to 3600 (default 1)\n"
    "      --once             print one frame on stdout and exit (every device)\n"
    "      --at TIME          the moment of a file: the last event at or before\n"
    "                         TIME since the start (12.5s, 800ms, 3min, 1h)\n"
    "      --device N         the device shown first (default: the first)\n"
    "      --top N            live sites listed, 1 to 32 (default 10)\n"
    "      --category-rules FILE  category rules tried before the defaults\n"
    "                         (default: $MEMSNAP_CATEGORY_RULES)\n"
    "  -h, --help             this help\n"
    "\n"
    "keys: q quits, s sorts the sites (by bytes, by trend, by name), d shows\n"
    "the next device.\n"
    "\n"
    "Exit status: 0 ok, 2 bad usage or input that is not a recording (one\n"
    "line on stderr).  See docs/cli.md.\n"
    "\n"
    "examples:\n"
    "  memsnap run -o train.msnap -- python3 train.py &  memsnap top train.msnap\n"
    "  memsnap top --once --at 90s run.msnap\n";

enum { SORT_BYTES = 0, SORT_TREND, SORT_NAME, NSORT };
static const char *const sort_names[NSORT] = {"bytes", "trend", "name"};

/* What the frame draws besides the view. */
typedef struct look {
    int width, height;      /* terminal size (height 0: no limit) */
    int utf8;               /* the sparkline's blocks, else ASCII */
    int once;               /* --once: every device, no key line */
    int dev;                /* index into view->dev shown (TUI) */
    int sort;
    double interval;
} look;

/* ---- the frame, as lines ----------------------------------------------------------- */

typedef struct frame {
    char **line;
    int n, cap;
} frame;

/* Appends a line (printf style), cut to width columns (counting UTF-8
 * characters, never splitting one). */
__attribute__((format(printf, 3, 4))) static void add(frame *f, int width, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    int cols = 0;
    size_t i = 0;
    for (; buf[i]; i++) {
        if (((unsigned char)buf[i] & 0xc0) != 0x80 && cols++ == width)
            break;
    }
    buf[i] = 0;
    while (i && buf[i - 1] == ' ')
        buf[--i] = 0;
    if (f->n == f->cap) {
        int nc = f->cap ? f->cap * 2 : 64;
        char **nl = realloc(f->line, (size_t)nc * sizeof *nl);
        if (!nl)
            return;
        f->line = nl;
        f->cap = nc;
    }
    f->line[f->n] = strdup(buf);
    if (f->line[f->n])
        f->n++;
}

static void frame_free(frame *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->line[i]);
    free(f->line);
    memset(f, 0, sizeof *f);
}

static const char *sz(uint64_t b, char *buf)
{
    return msnap_size_text(b, buf, 32);
}

/* "+12.00 MiB", "-3.50 MiB", "0 B". */
static const char *signed_sz(int64_t d, char *buf)
{
    char t[32];
    if (!d)
        return strcpy(buf, "0 B");
    snprintf(buf, 40, "%c%s", d > 0 ? '+' : '-',
             msnap_size_text(d > 0 ? (uint64_t)d : (uint64_t)(-(d + 1)) + 1, t, sizeof t));
    return buf;
}

/* The sparkline of d's history and its current levels, w characters: the
 * reserved (which = 0) or allocated (1) line, on one scale for both. */
static void spark(const an_live_dev *d, int which, int w, int utf8, char *out, size_t cap)
{
    static const char *const blocks[8] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
                                          "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
                                          "\xe2\x96\x87", "\xe2\x96\x88"};
    static const char ascii[] = "_.-:=+*#";
    out[0] = 0;
    size_t n = d->nhist + 1;   /* the history, then now */
    if (w <= 0 || n < 2)
        return;
    uint64_t top = 0;
    for (size_t i = 0; i < d->nhist; i++)
        if (d->hist[i].reserved > top)
            top = d->hist[i].reserved;
    if (d->reserved > top)
        top = d->reserved;
    if (d->allocated > top)
        top = d->allocated;
    size_t per = (n + (size_t)w - 1) / (size_t)w, cols = (n + per - 1) / per, o = 0;
    for (size_t c = 0; c < cols; c++) {
        uint64_t v = 0;
        for (size_t i = c * per; i < (c + 1) * per && i < n; i++) {
            uint64_t x = i < d->nhist ? (which ? d->hist[i].allocated : d->hist[i].reserved)
                                      : (which ? d->allocated : d->reserved);
            if (x > v)
                v = x;
        }
        int k = top ? (int)((v * 8 + top - 1) / top) - 1 : 0;
        if (k < 0)
            k = 0;
        if (k > 7)
            k = 7;
        const char *s = utf8 ? blocks[k] : (char[2]){ascii[k], 0};
        size_t len = strlen(s);
        if (o + len + 1 > cap)
            break;
        memcpy(out + o, s, len);
        o += len;
    }
    out[o] = 0;
}

static const an_live_dev *sort_dev;
static int sort_mode;

static int cmp_site(const void *a, const void *b)
{
    const an_live_site *x = &sort_dev->sites[*(const int *)a];
    const an_live_site *y = &sort_dev->sites[*(const int *)b];
    if (sort_mode == SORT_TREND && x->trend != y->trend)
        return x->trend > y->trend ? -1 : 1;
    if (sort_mode == SORT_NAME) {
        int c = strcmp(x->label, y->label);
        if (c)
            return c;
    }
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* The lines of one device. */
static void device_lines(frame *f, const an_live_view *v, const an_live_dev *d, const look *lk)
{
    int W = lk->width;
    char a[40], b[40], c[40], e[40], sp[2048];
    add(f, W, "device %d  %s%s%s", d->device, d->name[0] ? d->name : "(name unknown)",
        d->total ? ", " : "", d->total ? sz(d->total, a) : "");
    int sw = W - 52;
    if (sw > 60)
        sw = 60;   /* AN_LIVE_HISTORY (ten minutes) at ten seconds a character */
    spark(d, 0, sw, lk->utf8, sp, sizeof sp);
    if (v->in_process)
        add(f, W, "  reserved   not recorded (memsnap.record() sees PyTorch's blocks alone; "
            "memsnap run records the driver)");
    else
        add(f, W, "  reserved   %-11s peak %-11s %s", sz(d->reserved, a), sz(d->peak_reserved, b),
            sp);
    if (v->blocks_seen) {
        spark(d, 1, sw, lk->utf8, sp, sizeof sp);
        add(f, W, "  allocated  %-11s peak %-11s %s", sz(d->allocated, a), sz(d->peak_allocated, b),
            sp);
        if (d->frag_known)
            add(f, W, "  free inside reserved %s, largest free block %s",
                sz(d->free_in_reserved, a), sz(d->largest_free, b));
        else
            add(f, W, "  free inside reserved not known (no driver memory recorded around the "
                "blocks)");
    } else {
        add(f, W, "  allocated  not seen (no allocator blocks in this recording)");
    }
    if (d->nhist)
        add(f, W, "  sparkline  %s, one point a second",
            msnap_time_text(v->t_ns - d->hist[0].t_ns, a, sizeof a));
    uint64_t res = v->in_process ? 0 : d->reserved;   /* not known in-process */
    if (d->total && (d->device_used || res)) {
        uint64_t used = d->device_used ? d->device_used : res;
        add(f, W, "  headroom   %s to the device's %s (%s %s)",
            sz(d->total > used ? d->total - used : 0, a), sz(d->total, b),
            d->device_used ? "driver used" : "reserved", sz(used, c));
    } else if (d->total) {
        add(f, W, "  headroom   not known (neither the driver's used figure nor driver memory "
            "recorded)");
    }
    add(f, W, "  OOMs       %" PRIu64, d->ooms);
    if (!d->nsites) {
        add(f, W, "  top sites  none live");
    } else {
        uint64_t span = 0;
        for (int i = 0; i < d->nsites; i++)
            if (d->sites[i].trend_span_ns > span)
                span = d->sites[i].trend_span_ns;
        snprintf(e, sizeof e, "%s", span ? msnap_time_text(span, c, sizeof c) : "");
        add(f, W, "  top sites (%s, by %s)%*s live   change over %s",
            d->site_layer == MSNAP_LAYER_ALLOCATED ? "allocated" : "reserved",
            sort_names[lk->sort], 1, "", span ? e : "(no earlier second yet)");
        int order[AN_LIVE_SITES];
        for (int i = 0; i < d->nsites; i++)
            order[i] = i;
        sort_dev = d;
        sort_mode = lk->sort;
        qsort(order, (size_t)d->nsites, sizeof *order, cmp_site);
        for (int i = 0; i < d->nsites; i++) {
            const an_live_site *s = &d->sites[order[i]];
            add(f, W, "    %11s  %12s  %s", sz(s->bytes, a),
                s->trend_span_ns ? signed_sz(s->trend, b) : "", s->label);
        }
    }
    if (d->ncats) {
        char cats[1024];
        size_t o = 0;
        for (int i = 0; i < d->ncats && o + 64 < sizeof cats; i++)
            o += (size_t)snprintf(cats + o, sizeof cats - o, "%s%s %s", i ? ", " : "",
                                  d->cats[i].name, sz(d->cats[i].bytes, a));
        add(f, W, "  categories %s", cats);
    }
}

/* The whole frame of view v. */
static void build_frame(frame *f, const an_live_view *v, const look *lk)
{
    int W = lk->width;
    char a[40], b[40], status[256];
    if (v->at_ns != UINT64_MAX)
        snprintf(status, sizeof status, "at %s%s", msnap_time_text(v->at_ns, a, sizeof a),
                 v->finished ? " of a finished recording" : "");
    else if (v->source == AN_LIVE_FOLLOW && !v->finished)
        snprintf(status, sizeof status, "stream, being written%s",
                 v->catching_up ? " (catching up)" : "");
    else if (v->source == AN_LIVE_RING)
        snprintf(status, sizeof status, "ring-mode run, live from %s.live", v->path);
    else if (v->finished)
        snprintf(status, sizeof status, "finished (%s)", v->reason[0] ? v->reason : "trailer");
    else
        snprintf(status, sizeof status, "%s, no trailer (still written, or its process died)",
                 v->mode);
    add(f, W, "memsnap top  %s  %s", v->path, status);
    if (v->replaced)
        add(f, W, "  %s is another file now (a new recording?): run memsnap top again to follow it",
            v->path);
    else if (v->idle_s >= 3 && !v->finished)
        add(f, W, "  no new data for %.0f s", v->idle_s);
    add(f, W, "process  pid %" PRId64 " on %s, at %s%s, %" PRIu64 " events, %" PRIu64
        " dropped", v->pid, v->host, msnap_time_text(v->t_ns, a, sizeof a),
        v->at_ns != UINT64_MAX ? " (--at)" : "", v->events, v->dropped);
    add(f, W, "command  %s", v->command[0] ? v->command : "?");
    if (v->valleys >= 2)
        add(f, W, "floor    %s at the first valley, %s at the latest of %" PRIu64 " (%s)",
            sz(v->floor_first, a), sz(v->floor_last, b), v->valleys,
            v->floor_last > v->floor_first ? "rising"
            : v->floor_last < v->floor_first ? "falling" : "flat");
    else
        add(f, W, "floor    not known yet (%" PRIu64 " valley%s of the total so far)", v->valleys,
            v->valleys == 1 ? "" : "s");
    if (!v->ndev) {
        add(f, W, "%s", "");
        add(f, W, "no device memory recorded yet");
        return;
    }
    for (int i = 0; i < v->ndev; i++) {
        if (!lk->once && i != lk->dev)
            continue;
        add(f, W, "%s", "");
        device_lines(f, v, &v->dev[i], lk);
    }
}

/* ---- the terminal ------------------------------------------------------------------- */

static struct termios saved_tio;
static int tio_saved;
static volatile sig_atomic_t got_winch, got_quit;

static void on_winch(int s)
{
    (void)s;
    got_winch = 1;
}

static void on_quit(int s)
{
    (void)s;
    got_quit = 1;
}

static void term_restore(void)
{
    if (!tio_saved)
        return;
    tio_saved = 0;
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
    tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
}

static int term_setup(void)
{
    if (tcgetattr(STDIN_FILENO, &saved_tio) != 0)
        return -1;
    struct termios t = saved_tio;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t) != 0)
        return -1;
    tio_saved = 1;
    fputs("\033[?1049h\033[?25l", stdout);
    fflush(stdout);
    return 0;
}

static void term_size(int *w, int *h)
{
    struct winsize ws;
    *w = 100;
    *h = 40;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        *w = ws.ws_col;
        *h = ws.ws_row;
    }
}

static void draw(const an_live_view *v, look *lk)
{
    frame f = {0};
    if (lk->dev >= v->ndev)
        lk->dev = 0;
    build_frame(&f, v, lk);
    int body = lk->height > 2 ? lk->height - 2 : f.n;
    fputs("\033[H", stdout);
    for (int i = 0; i < f.n && i < body; i++)
        printf("%s\033[K\r\n", f.line[i]);
    fputs("\033[J", stdout);
    char keys[256];
    snprintf(keys, sizeof keys, "q quit   s sort: %s   d device: %d of %d   every %.3g s",
             sort_names[lk->sort], v->ndev ? lk->dev + 1 : 0, v->ndev, lk->interval);
    printf("\033[%d;1H\033[7m%-*.*s\033[0m", lk->height > 0 ? lk->height : f.n + 2,
           lk->width, lk->width, keys);
    fflush(stdout);
    frame_free(&f);
}

/* The interactive loop.  0 at q, 2 after an error line. */
static int run_tui(an_live *l, look *lk, double interval)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_winch;
    sigaction(SIGWINCH, &sa, NULL);
    sa.sa_handler = on_quit;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (term_setup() != 0) {
        fprintf(stderr, "memsnap top: cannot set up the terminal: %s\n", strerror(errno));
        return 2;
    }
    char err[1280];
    term_size(&lk->width, &lk->height);
    draw(an_live_view_of(l), lk);
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int rc = 0;
    while (!got_quit) {
        const an_live_view *v = an_live_view_of(l);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = v->catching_up ? 0
                      : (double)(next.tv_sec - now.tv_sec) + (next.tv_nsec - now.tv_nsec) / 1e9 +
                            interval;
        int ms = left > 0 ? (int)(left * 1000) : 0;
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int n = poll(&p, 1, ms);
        if (got_winch) {
            got_winch = 0;
            term_size(&lk->width, &lk->height);
            draw(v, lk);
        }
        if (n > 0) {
            char c;
            if (read(STDIN_FILENO, &c, 1) == 1) {
                if (c == 'q' || c == 'Q')
                    break;
                if (c == 's' || c == 'S')
                    lk->sort = (lk->sort + 1) % NSORT;
                if ((c == 'd' || c == 'D') && v->ndev)
                    lk->dev = (lk->dev + 1) % v->ndev;
                draw(v, lk);
            } else if (!isatty(STDIN_FILENO)) {
                break;   /* the terminal went away */
            }
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &next);
        if (an_live_update(l, err, sizeof err)) {
            term_restore();
            fprintf(stderr, "%s\n", err);
            rc = 2;
            break;
        }
        draw(an_live_view_of(l), lk);
    }
    term_restore();
    return rc;
}

int cmd_top(int argc, char **argv)
{
    enum { O_INTERVAL = 256, O_ONCE, O_AT, O_DEVICE, O_TOP, O_RULES };
    static const struct option opts[] = {
        {"interval", required_argument, 0, O_INTERVAL},
        {"once", no_argument, 0, O_ONCE},
        {"at", required_argument, 0, O_AT},
        {"device", required_argument, 0, O_DEVICE},
        {"top", required_argument, 0, O_TOP},
        {"category-rules", required_argument, 0, O_RULES},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    an_live_opts lo = {.at_ns = UINT64_MAX, .sites = 10, .symbolize = 1,
                       .category_rules = getenv("MEMSNAP_CATEGORY_RULES")};
    if (lo.category_rules && !*lo.category_rules)
        lo.category_rules = NULL;
    double interval = 1;
    int once = 0, device = -1;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case O_INTERVAL:
            interval = strtod(optarg, &end);
            if (end == optarg || *end || !(interval >= 0.1 && interval <= 3600))
                return cli_usage_error("top", "--interval wants seconds from 0.1 to 3600, not "
                                       "\"%s\"", optarg);
            break;
        case O_ONCE:
            once = 1;
            break;
        case O_AT:
            if (msnap_time_parse(optarg, &lo.at_ns))
                return cli_usage_error("top", "--at wants a time since the start (12.5s, 800ms, "
                                       "3min, 1h), not \"%s\"", optarg);
            break;
        case O_DEVICE: {
            long d = strtol(optarg, &end, 10);
            if (end == optarg || *end || d < 0 || d >= MSNAP_MAX_DEVICES)
                return cli_usage_error("top", "--device wants a device number from 0 to %d, not "
                                       "\"%s\"", MSNAP_MAX_DEVICES - 1, optarg);
            device = (int)d;
            break;
        }
        case O_TOP: {
            long n = strtol(optarg, &end, 10);
            if (end == optarg || *end || n < 1 || n > AN_LIVE_SITES)
                return cli_usage_error("top", "--top wants a number from 1 to %d, not \"%s\"",
                                       AN_LIVE_SITES, optarg);
            lo.sites = (int)n;
            break;
        }
        case O_RULES:
            lo.category_rules = optarg;
            break;
        case 'h':
            fputs(top_usage, stdout);
            return fflush(stdout) == 0 ? 0 : 2;
        default:
            return cli_option_error("top", argv, "h", opts);
        }
    }
    if (optind >= argc)
        return cli_usage_error("top", "expected one snapshot (memsnap top SNAP)");
    if (optind + 1 < argc)
        return cli_usage_error("top", "expected one snapshot, got %d", argc - optind);
    const char *path = argv[optind];
    if (!strcmp(path, "-"))
        return cli_usage_error("top", "top follows a file by its path; standard input is not one");
    if (!once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return cli_usage_error("top", "the terminal view needs a terminal; --once prints one "
                               "frame");
    msnap_set_progress(NULL, NULL);   /* the frame is the progress */
    setlocale(LC_CTYPE, "");
    look lk = {.width = once ? 1000 : 100, .utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8"), .once = once,
               .interval = interval};
    char err[1280];
    an_live *l = an_live_open(path, &lo, err, sizeof err);
    if (!l) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    const an_live_view *v = an_live_view_of(l);
    if (device >= 0) {
        int found = -1;
        for (int i = 0; i < v->ndev; i++)
            if (v->dev[i].device == device)
                found = i;
        if (found < 0 && once) {
            fprintf(stderr, "memsnap top: %s has no memory on device %d\n", path, device);
            an_live_close(l);
            return 2;
        }
        lk.dev = found < 0 ? 0 : found;
    }
    int rc = 0;
    if (once) {
        while (v->catching_up && !(rc = an_live_update(l, err, sizeof err)))
            v = an_live_view_of(l);
        if (rc) {
            fprintf(stderr, "%s\n", err);
            an_live_close(l);
            return 2;
        }
        frame f = {0};
        if (device >= 0) {
            /* one device: the frame's header, then that one */
            lk.once = 0;
        }
        build_frame(&f, v, &lk);
        for (int i = 0; i < f.n; i++)
            printf("%s\n", f.line[i]);
        frame_free(&f);
        rc = fflush(stdout) == 0 ? 0 : 2;
    } else {
        rc = run_tui(l, &lk, interval);
    }
    an_live_close(l);
    return rc;
}
