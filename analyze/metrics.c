/* Prometheus metrics over HTTP (metrics.h has the contract): the text of
 * the live views, a refresher thread and a server thread.
 *
 * The refresher: once a second (or when asked), the registrations in the
 * folder are looked at (DIR/PID.reg: "key value" lines, recorder/live.c),
 * a live view is opened for each new process (retried each second while
 * its file is not there yet), every view is updated, and the text of all
 * of them replaces the last one under the lock.  The server: one poll()
 * loop over the listening socket, a wake-up pipe and at most MAX_CONN
 * connections, each with its request buffer, its deadline and, once the
 * request is whole, its copy of the text to write.
 */
#define _GNU_SOURCE
#include "metrics.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "format/state.h"

#define MAX_CONN 16
#define MAX_REQUEST 8192
#define CONN_TIMEOUT_MS 10000
#define MAX_PROCS 256

/* ---- the text -------------------------------------------------------------------- */

typedef struct tbuf {
    char *b;
    size_t n, cap;
    int err;
} tbuf;

__attribute__((format(printf, 2, 3))) static void tb_printf(tbuf *t, const char *fmt, ...)
{
    for (;;) {
        size_t room = t->cap - t->n;
        va_list ap;
        va_start(ap, fmt);
        int k = t->b ? vsnprintf(t->b + t->n, room, fmt, ap) : -1;
        va_end(ap);
        if (k >= 0 && (size_t)k < room) {
            t->n += (size_t)k;
            return;
        }
        size_t nc = t->cap ? t->cap * 2 : 16384;
        while (k >= 0 && nc < t->n + (size_t)k + 1)
            nc *= 2;
        char *nb = realloc(t->b, nc);
        if (!nb) {
            t->err = 1;
            return;
        }
        t->b = nb;
        t->cap = nc;
    }
}

/* A label value, escaped as the exposition format wants. */
static void tb_label(tbuf *t, const char *s)
{
    char buf[1024];
    size_t o = 0;
    for (; *s && o + 3 < sizeof buf; s++) {
        if (*s == '\\' || *s == '"') {
            buf[o++] = '\\';
            buf[o++] = *s;
        } else if (*s == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = 0;
    tb_printf(t, "%s", buf);
}

/* {device="D",pid="P",host="H",rank="R" (without the closing brace). */
static void tb_labels(tbuf *t, const an_metrics_proc *p, int device)
{
    tb_printf(t, "{");
    if (device >= -1)
        tb_printf(t, "device=\"%d\",", device);
    tb_printf(t, "pid=\"%" PRId64 "\",host=\"", p->view->pid);
    tb_label(t, p->view->host);
    tb_printf(t, "\",rank=\"");
    tb_label(t, p->rank ? p->rank : "");
    tb_printf(t, "\"");
}

enum { F_RES, F_ALLOC, F_PRES, F_PALLOC, F_FREE, F_LARGEST, F_TOTAL, F_USED, F_OOM, NDEVF };

static const struct {
    const char *name, *type, *help;
} devf[NDEVF] = {
    {"memsnap_reserved_bytes", "gauge",
     "Device memory the process holds from the driver now (cuMemAlloc, cuMemCreate, "
     "stream-ordered and managed allocations)."},
    {"memsnap_allocated_bytes", "gauge",
     "Allocator blocks live now (PyTorch's or memsnap's caching allocator)."},
    {"memsnap_peak_reserved_bytes", "gauge", "The highest reserved so far."},
    {"memsnap_peak_allocated_bytes", "gauge", "The highest allocated so far."},
    {"memsnap_free_in_reserved_bytes", "gauge",
     "Reserved memory in no allocator block now (the allocator's cache)."},
    {"memsnap_largest_free_block_bytes", "gauge",
     "The largest free block inside reserved memory now."},
    {"memsnap_device_total_bytes", "gauge", "The device's memory."},
    {"memsnap_device_used_bytes", "gauge",
     "What the driver says is used on the device (NVML: every process and context)."},
    {"memsnap_oom_total", "counter", "Out-of-memory events so far."},
};

/* The value of field k of a device; 0 when it has none (*has = 0).  An
 * in-process recording (memsnap.record()) has no driver level: its reserved
 * memory is not known, and is left out rather than served as 0. */
static uint64_t dev_value(const an_live_view *v, const an_live_dev *d, int k, int *has)
{
    *has = 1;
    switch (k) {
    case F_RES: *has = !v->in_process; return d->reserved;
    case F_PRES: *has = !v->in_process; return d->peak_reserved;
    case F_ALLOC: *has = v->blocks_seen; return d->allocated;
    case F_PALLOC: *has = v->blocks_seen; return d->peak_allocated;
    case F_FREE: *has = d->frag_known; return d->free_in_reserved;
    case F_LARGEST: *has = d->frag_known; return d->largest_free;
    case F_TOTAL: *has = d->total != 0; return d->total;
    case F_USED: *has = d->device_used != 0; return d->device_used;
    case F_OOM: return d->ooms;
    default: *has = 0; return 0;
    }
}

int an_metrics_text(const an_metrics_proc *p, int n, char **out, size_t *len)
{
    tbuf t = {0};
    for (int k = 0; k < NDEVF; k++) {
        tb_printf(&t, "# HELP %s %s\n# TYPE %s %s\n", devf[k].name, devf[k].help, devf[k].name,
                  devf[k].type);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < p[i].view->ndev; j++) {
                const an_live_dev *d = &p[i].view->dev[j];
                int has;
                uint64_t x = dev_value(p[i].view, d, k, &has);
                if (!has)
                    continue;
                tb_printf(&t, "%s", devf[k].name);
                tb_labels(&t, &p[i], d->device);
                tb_printf(&t, "} %" PRIu64 "\n", x);
            }
    }
    /* the process's counters (no device label) */
    static const struct { const char *name, *help; } procf[] = {
        {"memsnap_events_total", "Memory events recorded so far."},
        {"memsnap_dropped_events_total",
         "Events the recorder could not keep (ring mode: overwritten)."},
    };
    for (int k = 0; k < 2; k++) {
        tb_printf(&t, "# HELP %s %s\n# TYPE %s counter\n", procf[k].name, procf[k].help,
                  procf[k].name);
        for (int i = 0; i < n; i++) {
            tb_printf(&t, "%s", procf[k].name);
            tb_labels(&t, &p[i], -2);
            tb_printf(&t, "} %" PRIu64 "\n", k ? p[i].view->dropped : p[i].view->events);
        }
    }
    tb_printf(&t, "# HELP memsnap_site_live_bytes Live bytes of the top allocation sites now, "
                  "named as memsnap summary names them.\n"
                  "# TYPE memsnap_site_live_bytes gauge\n");
    for (int i = 0; i < n; i++)
        for (int j = 0; j < p[i].view->ndev; j++) {
            const an_live_dev *d = &p[i].view->dev[j];
            for (int s = 0; s < d->nsites && s < AN_METRICS_SITES; s++) {
                tb_printf(&t, "memsnap_site_live_bytes");
                tb_labels(&t, &p[i], d->device);
                tb_printf(&t, ",layer=\"%s\",site=\"",
                          d->site_layer == MSNAP_LAYER_ALLOCATED ? "allocated" : "reserved");
                tb_label(&t, d->sites[s].label);
                tb_printf(&t, "\"} %" PRIu64 "\n", d->sites[s].bytes);
            }
        }
    if (t.err || !t.b) {
        free(t.b);
        return -1;
    }
    *out = t.b;
    *len = t.n;
    return 0;
}

/* ---- the server -------------------------------------------------------------------- */

typedef struct conn {
    int fd;
    char req[MAX_REQUEST];
    size_t nreq;
    char *resp;
    size_t nresp, off;
    int draining;                    /* answered: what the peer still sends is
                                        read and dropped until it closes (so
                                        the answer is not lost to a reset) */
    struct timespec deadline;
} conn;

typedef struct proc {
    char name[64];                   /* the registration's file name */
    char path[PATH_MAX];
    char rank[64];
    an_live *live;
} proc;

struct an_metrics {
    int lfd;
    char addr[80];
    int wake[2];                     /* the server's wake-up pipe */
    pthread_t server, refresher;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, refresh_asked;
    uint64_t refreshes;
    char *text;                      /* the last refresh's text */
    size_t ntext;
    /* the sources */
    char *reg_dir;
    proc procs[MAX_PROCS];
    int nprocs;
    conn conns[MAX_CONN];
};

static int parse_port(const char *s, int *port)
{
    char *end;
    errno = 0;
    long p = strtol(s, &end, 10);
    if (!*s || *end || errno || p < 0 || p > 65535 || s[0] == '-' || s[0] == '+')
        return -1;
    *port = (int)p;
    return 0;
}

an_metrics *an_metrics_listen(const char *spec, char *err, size_t errlen)
{
    char host[64] = "127.0.0.1";
    const char *ps = spec;
    int v6 = 0;
    if (spec[0] == '[') {
        const char *e = strchr(spec, ']');
        if (!e || e[1] != ':' || (size_t)(e - spec - 1) >= sizeof host) {
            snprintf(err, errlen, "bad address \"%s\": want [ADDR:]PORT ([IPv6]:PORT)", spec);
            return NULL;
        }
        snprintf(host, sizeof host, "%.*s", (int)(e - spec - 1), spec + 1);
        ps = e + 2;
        v6 = 1;
    } else if (strchr(spec, ':')) {
        const char *c = strrchr(spec, ':');
        if ((size_t)(c - spec) >= sizeof host || c == spec) {
            snprintf(err, errlen, "bad address \"%s\": want [ADDR:]PORT", spec);
            return NULL;
        }
        snprintf(host, sizeof host, "%.*s", (int)(c - spec), spec);
        ps = c + 1;
        if (!strcmp(host, "localhost"))
            snprintf(host, sizeof host, "127.0.0.1");
    }
    int port;
    if (parse_port(ps, &port)) {
        snprintf(err, errlen, "bad address \"%s\": the port must be a number from 1 to 65535",
                 spec);
        return NULL;
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) {
            snprintf(err, errlen, "bad address \"%s\": %s is not an IPv6 address", spec, host);
            return NULL;
        }
        sl = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
            snprintf(err, errlen, "bad address \"%s\": %s is not an IPv4 address (or localhost, "
                     "or [IPv6])", spec, host);
            return NULL;
        }
        sl = sizeof *a;
    }
    an_metrics *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    m->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    m->wake[0] = m->wake[1] = -1;
    for (int i = 0; i < MAX_CONN; i++)
        m->conns[i].fd = -1;
    int one = 1;
    if (m->lfd >= 0)
        setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (m->lfd < 0 || bind(m->lfd, (struct sockaddr *)&ss, sl) != 0 || listen(m->lfd, 64) != 0) {
        int e = errno;
        if (e == EADDRINUSE)
            snprintf(err, errlen, "port %d on %s is taken (%s)", port, host, strerror(e));
        else if (e == EADDRNOTAVAIL)
            snprintf(err, errlen, "bad address \"%s\": %s is not an address of this machine",
                     spec, host);
        else
            snprintf(err, errlen, "cannot listen on %s: %s", spec, strerror(e));
        if (m->lfd >= 0)
            close(m->lfd);
        free(m);
        return NULL;
    }
    sl = sizeof ss;
    getsockname(m->lfd, (struct sockaddr *)&ss, &sl);
    int bound = v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(m->addr, sizeof m->addr, v6 ? "[%s]:%d" : "%s:%d", host, bound);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    return m;
}

const char *an_metrics_address(const an_metrics *m)
{
    return m->addr;
}

static void conn_close(conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->resp);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

static int past(const struct timespec *d)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > d->tv_sec || (now.tv_sec == d->tv_sec && now.tv_nsec >= d->tv_nsec);
}

/* The answer to a whole request in c->req (status line, headers, body). */
static void answer(an_metrics *m, conn *c, int too_long)
{
    const char *status = "200 OK", *body = NULL;
    size_t nbody = 0;
    int head = 0;
    char line[256];
    size_t ll = strcspn(c->req, "\r\n");
    snprintf(line, sizeof line, "%.*s", (int)(ll < sizeof line ? ll : sizeof line - 1), c->req);
    char method[16] = "", target[200] = "";
    if (too_long) {
        status = "431 Request Header Fields Too Large";
        body = "the request is longer than 8 KiB\n";
    } else if (sscanf(line, "%15s %199s", method, target) != 2) {
        status = "400 Bad Request";
        body = "not an HTTP request\n";
    } else if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        status = "405 Method Not Allowed";
        body = "memsnap serves GET /metrics\n";
    } else {
        head = !strcmp(method, "HEAD");
        target[strcspn(target, "?")] = 0;
        if (strcmp(target, "/metrics")) {
            status = "404 Not Found";
            body = "memsnap serves /metrics only\n";
        }
    }
    pthread_mutex_lock(&m->mu);
    if (!body) {
        body = m->text ? m->text : "";
        nbody = m->ntext;
    } else {
        nbody = strlen(body);
    }
    char hdr[512];
    int nh = snprintf(hdr, sizeof hdr, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n", status,
                      !strcmp(status, "200 OK") ? "text/plain; version=0.0.4; charset=utf-8"
                                                : "text/plain; charset=utf-8", nbody);
    size_t total = (size_t)nh + (head ? 0 : nbody);
    c->resp = malloc(total + 1);
    if (c->resp) {
        memcpy(c->resp, hdr, (size_t)nh);
        if (!head)
            memcpy(c->resp + nh, body, nbody);
        c->nresp = total;
        c->off = 0;
    }
    pthread_mutex_unlock(&m->mu);
}

/* Reads what the peer sent; answers once the headers are whole. */
static void conn_read(an_metrics *m, conn *c)
{
    for (;;) {
        if (c->nreq == sizeof c->req - 1) {
            c->req[c->nreq] = 0;
            answer(m, c, 1);
            return;
        }
        ssize_t k = recv(c->fd, c->req + c->nreq, sizeof c->req - 1 - c->nreq, 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            conn_close(c);
            return;
        }
        c->nreq += (size_t)k;
        c->req[c->nreq] = 0;
        if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
            answer(m, c, 0);
            return;
        }
    }
}

static void conn_write(conn *c)
{
    while (c->off < c->nresp) {
        ssize_t k = send(c->fd, c->resp + c->off, c->nresp - c->off, MSG_NOSIGNAL);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            conn_close(c);
            return;
        }
        c->off += (size_t)k;
    }
    shutdown(c->fd, SHUT_WR);
    c->draining = 1;
}

/* An answered connection: drops what comes until the peer closes. */
static void conn_drain(conn *c)
{
    char b[4096];
    for (;;) {
        ssize_t k = recv(c->fd, b, sizeof b, 0);
        if (k > 0)
            continue;
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        conn_close(c);
        return;
    }
}

static void *server_main(void *arg)
{
    an_metrics *m = arg;
    for (;;) {
        struct pollfd pf[MAX_CONN + 2];
        int idx[MAX_CONN + 2], n = 0;
        pf[n] = (struct pollfd){m->wake[0], POLLIN, 0};
        idx[n++] = -2;
        pf[n] = (struct pollfd){m->lfd, POLLIN, 0};
        idx[n++] = -1;
        for (int i = 0; i < MAX_CONN; i++) {
            conn *c = &m->conns[i];
            if (c->fd < 0)
                continue;
            if (past(&c->deadline)) {
                conn_close(c);
                continue;
            }
            pf[n] = (struct pollfd){c->fd, c->resp && !c->draining ? POLLOUT : POLLIN, 0};
            idx[n++] = i;
        }
        if (poll(pf, (nfds_t)n, 250) < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&m->mu);
        int stop = m->stop;
        pthread_mutex_unlock(&m->mu);
        if (stop)
            break;
        for (int j = 0; j < n; j++) {
            if (!pf[j].revents)
                continue;
            if (idx[j] == -2) {
                char b[64];
                while (read(m->wake[0], b, sizeof b) > 0)
                    ;
            } else if (idx[j] == -1) {
                for (;;) {
                    int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0)
                        break;
                    conn *c = NULL;
                    for (int i = 0; i < MAX_CONN && !c; i++)
                        if (m->conns[i].fd < 0)
                            c = &m->conns[i];
                    if (!c) {
                        close(fd);   /* too many at once */
                        continue;
                    }
                    c->fd = fd;
                    c->nreq = 0;
                    clock_gettime(CLOCK_MONOTONIC, &c->deadline);
                    c->deadline.tv_sec += CONN_TIMEOUT_MS / 1000;
                }
            } else {
                conn *c = &m->conns[idx[j]];
                if (c->fd < 0)
                    continue;
                if (pf[j].revents & (POLLERR | POLLNVAL)) {
                    conn_close(c);
                    continue;
                }
                if (c->draining) {
                    conn_drain(c);
                    continue;
                }
                if (!c->resp)
                    conn_read(m, c);
                if (c->fd >= 0 && c->resp)
                    conn_write(c);
                if (c->fd >= 0 && c->draining)
                    conn_drain(c);
            }
        }
    }
    for (int i = 0; i < MAX_CONN; i++)
        conn_close(&m->conns[i]);
    return NULL;
}

/* ---- the refresher ------------------------------------------------------------------ */

/* Reads DIR/NAME: its "path" and "rank" lines.  0, -1. */
static int read_registration(const char *dir, const char *name, proc *p)
{
    char file[PATH_MAX], line[PATH_MAX + 16];
    if ((size_t)snprintf(file, sizeof file, "%s/%s", dir, name) >= sizeof file)
        return -1;
    FILE *f = fopen(file, "re");
    if (!f)
        return -1;
    p->path[0] = p->rank[0] = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        int is_path = !strncmp(line, "path ", 5), is_rank = !strncmp(line, "rank ", 5);
        size_t n = is_path || is_rank ? strlen(line + 5) : 0;
        if (is_path && n < sizeof p->path)
            memcpy(p->path, line + 5, n + 1);
        else if (is_rank && n < sizeof p->rank)
            memcpy(p->rank, line + 5, n + 1);
    }
    fclose(f);
    return p->path[0] ? 0 : -1;
}

static void scan_registrations(an_metrics *m)
{
    DIR *d = opendir(m->reg_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && m->nprocs < MAX_PROCS) {
        size_t n = strlen(e->d_name);
        if (n < 5 || n >= sizeof m->procs[0].name || strcmp(e->d_name + n - 4, ".reg"))
            continue;
        int known = 0;
        for (int i = 0; i < m->nprocs && !known; i++)
            known = !strcmp(m->procs[i].name, e->d_name);
        if (known)
            continue;
        proc *p = &m->procs[m->nprocs];
        memset(p, 0, sizeof *p);
        memcpy(p->name, e->d_name, n + 1);   /* n < sizeof p->name: checked above */
        if (read_registration(m->reg_dir, e->d_name, p) == 0)
            m->nprocs++;
    }
    closedir(d);
}

static void refresh_once(an_metrics *m)
{
    if (m->reg_dir)
        scan_registrations(m);
    an_metrics_proc views[MAX_PROCS];
    int nv = 0;
    char err[1280];
    for (int i = 0; i < m->nprocs; i++) {
        proc *p = &m->procs[i];
        if (!p->live) {
            an_live_opts o = {.at_ns = UINT64_MAX, .sites = AN_METRICS_SITES, .wait_ms = 1,
                              .symbolize = 1};
            p->live = an_live_open(p->path, &o, err, sizeof err);   /* again next second */
        } else {
            for (int k = 0; k < 8; k++) {
                if (an_live_update(p->live, err, sizeof err)) {
                    an_live_close(p->live);
                    p->live = NULL;
                    break;
                }
                if (!an_live_view_of(p->live)->catching_up)
                    break;
            }
        }
        if (p->live)
            views[nv++] = (an_metrics_proc){an_live_view_of(p->live), p->rank};
    }
    char *text;
    size_t n;
    if (an_metrics_text(views, nv, &text, &n) == 0) {
        pthread_mutex_lock(&m->mu);
        free(m->text);
        m->text = text;
        m->ntext = n;
        pthread_mutex_unlock(&m->mu);
    }
}

static void *refresher_main(void *arg)
{
    an_metrics *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        pthread_mutex_unlock(&m->mu);
        refresh_once(m);
        pthread_mutex_lock(&m->mu);
        m->refreshes++;
        pthread_cond_broadcast(&m->cv);
        if (m->stop)
            break;
        if (!m->refresh_asked) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            pthread_cond_timedwait(&m->cv, &m->mu, &until);
        }
        m->refresh_asked = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

int an_metrics_start(an_metrics *m, const char *reg_dir, const char *path, const char *rank)
{
    if (reg_dir) {
        if (!(m->reg_dir = strdup(reg_dir)))
            return -1;
    } else {
        proc *p = &m->procs[m->nprocs++];
        snprintf(p->name, sizeof p->name, "self");
        snprintf(p->path, sizeof p->path, "%s", path);
        snprintf(p->rank, sizeof p->rank, "%s", rank ? rank : "");
    }
    if (pipe2(m->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    /* an answer before the first refresh is the empty families, not nothing */
    char *text;
    size_t n;
    if (an_metrics_text(NULL, 0, &text, &n) == 0) {
        m->text = text;
        m->ntext = n;
    }
    if (pthread_create(&m->refresher, NULL, refresher_main, m) != 0)
        return -1;
    if (pthread_create(&m->server, NULL, server_main, m) != 0) {
        pthread_mutex_lock(&m->mu);
        m->stop = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->refresher, NULL);
        return -1;
    }
    m->started = 1;
    return 0;
}

void an_metrics_refresh(an_metrics *m)
{
    if (!m || !m->started)
        return;
    pthread_mutex_lock(&m->mu);
    uint64_t want = m->refreshes + 2;   /* one that starts after this call */
    m->refresh_asked = 1;
    pthread_cond_broadcast(&m->cv);
    while (m->refreshes < want && !m->stop)
        pthread_cond_wait(&m->cv, &m->mu);
    pthread_mutex_unlock(&m->mu);
}

void an_metrics_stop(an_metrics *m)
{
    if (!m)
        return;
    if (m->started) {
        pthread_mutex_lock(&m->mu);
        m->stop = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
        if (write(m->wake[1], "x", 1) < 0) {
            /* the server sees stop within its poll timeout anyway */
        }
        pthread_join(m->server, NULL);
        pthread_join(m->refresher, NULL);
    }
    for (int i = 0; i < m->nprocs; i++)
        an_live_close(m->procs[i].live);
    if (m->lfd >= 0)
        close(m->lfd);
    if (m->wake[0] >= 0)
        close(m->wake[0]);
    if (m->wake[1] >= 0)
        close(m->wake[1]);
    free(m->text);
    free(m->reg_dir);
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}
