/* Tests the symbolizer library and `memsnap symbolize` end to end on this
 * very program (built with -g -O0): it writes a snapshot whose "module"
 * records describe its own process (msnap_self_modules) and whose stack
 * holds two IPs it knows the answer for:
 *   frame 0: the address of known_function + 1 (looked up, like every
 *            frame, at ip - 1: the function's first byte);
 *   frame 1: the return address known_function returns to, inside main,
 *            which must resolve (at ip - 1) to main and the line of the call.
 * argv[1] = the memsnap executable, argv[2] = a scratch directory. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "memsnap/format.h"
#include "symbolize/symbolize.h"
#include "../check.h"

static const char *memsnap, *dir;
static uint64_t ip_fn, ip_ret;
static int call_line;

/* The function whose name must come back. */
__attribute__((noinline)) static void *known_function(void)
{
    return __builtin_return_address(0);
}

/* Ends with "/name" or equals name. */
static int ends_with(const char *s, const char *name)
{
    size_t a = strlen(s), b = strlen(name);
    return a >= b && strcmp(s + a - b, name) == 0 &&
           (a == b || s[a - b - 1] == '/');
}

typedef struct wctx {
    msnap_out *out;
    const char *fake_build_id; /* non-NULL: replace every build-id */
    const char *move_from, *move_to; /* this module's path is written as move_to */
} wctx;

static wctx extra_modules;        /* write_snapshot_with's moves (set by a test) */

/* msnap_self_modules callback: writes one module line. */
static int put_module(const msnap_module *m, void *arg)
{
    wctx *w = arg;
    char buf[8192];
    msnap_module copy = *m;
    if (w->fake_build_id)
        copy.build_id = w->fake_build_id;
    if (w->move_from && m->path && !strcmp(m->path, w->move_from))
        copy.path = w->move_to;
    size_t n = msnap_fmt_module(buf, sizeof buf, &copy);
    return n ? msnap_out_write(w->out, buf, n) : -1;
}

/* Writes a snapshot of this process to path (zstd when level > 0); extra:
 * lines written after the stack line ("" for none). */
static int write_snapshot_with(const char *path, int level, const char *fake_bid,
                               const char *extra)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    msnap_out *o = fd >= 0 ? msnap_out_fdopen(fd, level) : NULL;
    if (!o)
        return -1;
    char buf[8192];
    const char *argv[] = {"test_symbolize"};
    msnap_header h = {.pid = getpid(), .argv = argv, .argc = 1,
                      .settings_json = "{}"};
    strcpy(h.host, "testhost");
    strcpy(h.clock, "CLOCK_MONOTONIC");
    strcpy(h.mode, "stream");
    size_t n = msnap_fmt_header(buf, sizeof buf, &h);
    int rc = n ? msnap_out_write(o, buf, n) : -1;
    wctx w = {o, fake_bid, extra_modules.move_from, extra_modules.move_to};
    rc |= msnap_self_modules(put_module, &w);
    uint64_t ips[2] = {ip_fn, ip_ret};
    msnap_stack st = {.id = 1, .depth = 2, .ips = ips};
    n = msnap_fmt_stack(buf, sizeof buf, &st);
    rc |= msnap_out_write(o, buf, n);
    rc |= msnap_out_write(o, extra, strlen(extra));
    msnap_event e = {.t_ns = 1000, .addr = 1 << 20, .size = 4096, .stack = 1,
                     .action = MSNAP_A_ALLOC, .api = MSNAP_API_cuMemAlloc_v2};
    n = msnap_fmt_event(buf, sizeof buf, &e);
    rc |= msnap_out_write(o, buf, n);
    msnap_trailer t = {.t_ns = 2000, .events = 1, .reason = "exit"};
    n = msnap_fmt_trailer(buf, sizeof buf, &t);
    rc |= msnap_out_write(o, buf, n);
    return msnap_out_close(o) | rc;
}

static int write_snapshot(const char *path, int level, const char *fake_bid)
{
    return write_snapshot_with(path, level, fake_bid, "");
}

/* The whole of a file, NUL-terminated, in a new buffer (*len bytes); NULL
 * when it cannot be read. */
static char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, fp)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(fp);
    if (b) {
        b[n] = 0;
        *len = n;
    }
    return b;
}

/* Whether files a and b hold the same bytes. */
static int same_bytes(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = slurp(a, &na), *y = slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

typedef struct found {
    int syms, events;
    char fn0[256], file0[512], fn1[256], file1[512];
    int line1;
    uint64_t off0;
} found;

/* Reads path and collects its sym records for ip_fn and ip_ret. */
static int read_syms(const char *path, found *f)
{
    char err[256];
    memset(f, 0, sizeof *f);
    msnap_reader *r = msnap_reader_open(path, err, sizeof err);
    if (!r) {
        fprintf(stderr, "%s: %s\n", path, err);
        return -1;
    }
    msnap_record rec;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        if (rec.type == MSNAP_REC_EVENT)
            f->events++;
        if (rec.type != MSNAP_REC_SYMBOL)
            continue;
        f->syms++;
        const msnap_symbol *y = &rec.u.symbol;
        if (y->ip == ip_fn) {
            snprintf(f->fn0, sizeof f->fn0, "%s", y->function);
            snprintf(f->file0, sizeof f->file0, "%s", y->file);
            f->off0 = y->offset;
        } else if (y->ip == ip_ret) {
            snprintf(f->fn1, sizeof f->fn1, "%s", y->function);
            snprintf(f->file1, sizeof f->file1, "%s", y->file);
            f->line1 = y->line;
        }
    }
    msnap_reader_close(r);
    return rc;
}

/* Runs a shell command; returns its exit status. */
static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, memsnap, a, b);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The library, in-process. */
static void test_library(void)
{
    msnap_symbolizer *s = msnap_symbolizer_new();
    CHECK(s != NULL);
    CHECK(msnap_symbolizer_add_self(s) >= 1);
    msnap_symbol y;
    CHECK(msnap_symbolizer_resolve(s, ip_fn, &y) == 1);
    CHECK(strcmp(y.function, "known_function") == 0);
    CHECK(ends_with(y.file, "test_symbolize.c"));
    CHECK_EQ_U64(y.offset, 1);
    const char *first = y.function;
    CHECK(msnap_symbolizer_resolve(s, ip_fn, &y) == 1);
    CHECK(y.function == first); /* cached: same interned string */
    CHECK(msnap_symbolizer_resolve_frame(s, ip_ret, 1, &y) == 1);
    CHECK(strcmp(y.function, "main") == 0);
    CHECK_EQ_U64(y.line, call_line);
    CHECK(msnap_symbolizer_resolve(s, 16, &y) == 0); /* no module there */
    CHECK(y.function[0] == '\0' && y.file[0] == '\0' && y.line == 0);
    CHECK(msnap_symbolizer_add_module(s, "/nonexistent/lib.so", 0x1000, 0,
                                      NULL) == -1);
    CHECK(strstr(msnap_symbolizer_error(s), "/nonexistent/lib.so") != NULL);
    msnap_symbolizer_free(s);
}

/* memsnap symbolize -o OUT on a plain file. */
static void test_cli_plain(void)
{
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s/sym_in.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_out.msnap", dir);
    CHECK(write_snapshot(in, 0, NULL) == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s' -o '%s'", in, out), 0);
    found f;
    CHECK(read_syms(out, &f) == 0);
    CHECK_EQ_U64(f.events, 1);
    CHECK_EQ_U64(f.syms, 2);
    CHECK(strcmp(f.fn0, "known_function") == 0);
    CHECK(ends_with(f.file0, "test_symbolize.c"));
    CHECK_EQ_U64(f.off0, 1);
    CHECK(strcmp(f.fn1, "main") == 0);
    CHECK(ends_with(f.file1, "test_symbolize.c"));
    CHECK_EQ_U64(f.line1, call_line);
    /* The input is untouched. */
    CHECK(read_syms(in, &f) == 0);
    CHECK_EQ_U64(f.syms, 0);
    /* summary shows the names. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' summary --json '%s'", memsnap, out);
    FILE *p = popen(cmd, "r");
    char *buf = calloc(1, 1 << 20);
    size_t n = p && buf ? fread(buf, 1, (1 << 20) - 1, p) : 0;
    if (p)
        pclose(p);
    cJSON *o = n ? cJSON_Parse(buf) : NULL;
    const cJSON *fr = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(o,
                            "top_sites"), "reserved"), 0), "frames"), 0);
    CHECK(cJSON_IsString(fr) &&
          strncmp(fr->valuestring, "known_function (test_symbolize.c:",
                  33) == 0);
    cJSON_Delete(o);
    free(buf);
}

/* Default: in place, zstd stays zstd, running twice adds nothing. */
static void test_cli_in_place_zstd(void)
{
    char in[1024];
    snprintf(in, sizeof in, "%s/sym_inplace.msnap.zst", dir);
    CHECK(write_snapshot(in, 3, NULL) == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s'%s", in, ""), 0);
    unsigned char m[4] = {0};
    FILE *fp = fopen(in, "rb");
    CHECK(fp && fread(m, 1, 4, fp) == 4);
    if (fp)
        fclose(fp);
    CHECK(m[0] == 0x28 && m[1] == 0xB5 && m[2] == 0x2F && m[3] == 0xFD);
    found f;
    CHECK(read_syms(in, &f) == 0);
    CHECK_EQ_U64(f.syms, 2);
    CHECK(strcmp(f.fn0, "known_function") == 0);
    CHECK_EQ_U64(sh("'%s' symbolize --in-place '%s'%s", in, ""), 0);
    CHECK(read_syms(in, &f) == 0);
    CHECK_EQ_U64(f.syms, 2);
    CHECK_EQ_U64(f.events, 1);
}

/* A module whose build-id does not match the file: no wrong names. */
static void test_build_id_mismatch(void)
{
    char in[1024], out[1024];
    snprintf(in, sizeof in, "%s/sym_badbid.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_badbid_out.msnap", dir);
    CHECK(write_snapshot(in, 0, "deadbeef") == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s' -o '%s' 2>/dev/null", in, out), 0);
    found f;
    CHECK(read_syms(out, &f) == 0);
    CHECK_EQ_U64(f.syms, 2);
    CHECK(f.fn0[0] == '\0');
}

/* Standard input reads as a file does (one read, through the analysis
 * library): `symbolize - -o OUT` and `-o -` give the bytes `symbolize SNAP
 * -o OUT` gives, plain and zstd; without -o there is nothing to rewrite in
 * place, so it is a usage error of one line.  (Before, symbolize read its
 * input twice and refused standard input outright.) */
static void test_cli_stdin(void)
{
    char in[1024], zin[1024], a[1024], b[1024], c[1024], d[1024], e[1024], cmd[8192];
    snprintf(in, sizeof in, "%s/sym_stdin.msnap", dir);
    snprintf(zin, sizeof zin, "%s/sym_stdin.msnap.zst", dir);
    snprintf(a, sizeof a, "%s/sym_stdin_file.msnap", dir);
    snprintf(b, sizeof b, "%s/sym_stdin_o.msnap", dir);
    snprintf(c, sizeof c, "%s/sym_stdin_stdout.msnap", dir);
    snprintf(d, sizeof d, "%s/sym_stdin_zfile.msnap.zst", dir);
    snprintf(e, sizeof e, "%s/sym_stdin_zpipe.msnap.zst", dir);
    CHECK(write_snapshot(in, 0, NULL) == 0);
    CHECK(write_snapshot(zin, 3, NULL) == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s' -o '%s' 2>/dev/null", in, a), 0);
    CHECK_EQ_U64(sh("'%s' symbolize - -o '%s' 2>/dev/null < '%s'", b, in), 0);
    CHECK_EQ_U64(sh("cat '%2$s' | '%1$s' symbolize - -o - > '%3$s' 2>/dev/null", in, c), 0);
    CHECK(same_bytes(a, b));
    CHECK(same_bytes(a, c));
    found f;
    CHECK(read_syms(b, &f) == 0);
    CHECK_EQ_U64(f.syms, 2);
    CHECK_EQ_U64(f.events, 1);
    CHECK(strcmp(f.fn0, "known_function") == 0);
    CHECK(strcmp(f.fn1, "main") == 0);
    /* zstd in, zstd out, from a pipe as from a file */
    CHECK_EQ_U64(sh("'%s' symbolize '%s' -o '%s' 2>/dev/null", zin, d), 0);
    CHECK_EQ_U64(sh("cat '%2$s' | '%1$s' symbolize - -o '%3$s' 2>/dev/null", zin, e), 0);
    CHECK(same_bytes(d, e));
    size_t n = 0;
    unsigned char *z = (unsigned char *)slurp(e, &n);
    CHECK(z && n > 4 && z[0] == 0x28 && z[1] == 0xB5 && z[2] == 0x2F && z[3] == 0xFD);
    free(z);
    CHECK(read_syms(e, &f) == 0);
    CHECK(strcmp(f.fn0, "known_function") == 0);
    /* no -o: one line, exit 2, nothing written */
    snprintf(cmd, sizeof cmd, "'%s' symbolize - < '%s' > '%s/sym_stdin_noo.out' 2> '%s/sym_stdin_noo.err'",
             memsnap, in, dir, dir);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    char errp[1100];
    snprintf(errp, sizeof errp, "%s/sym_stdin_noo.err", dir);
    char *msg = slurp(errp, &n);
    CHECK(msg && strstr(msg, "give -o OUT") != NULL && strchr(msg, '\n') == msg + n - 1);
    free(msg);
    snprintf(errp, sizeof errp, "%s/sym_stdin_noo.out", dir);
    msg = slurp(errp, &n);
    CHECK(msg && n == 0);
    free(msg);
}

/* Every line goes through, a line of a type this version does not know
 * included; a nameless sym line of an IP resolved now is replaced by the
 * named one (one sym record per IP), and one for an IP that gets no better
 * answer is kept. */
static void test_cli_lines_kept(void)
{
    char in[1024], out[1024], extra[512];
    snprintf(in, sizeof in, "%s/sym_lines.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_lines_out.msnap", dir);
    snprintf(extra, sizeof extra,
             "{\"type\":\"from_the_future\",\"k\":[1,2,3]}\n"
             "{\"type\":\"sym\",\"ip\":\"0x%llx\",\"fn\":\"\"}\n"
             "{\"type\":\"stack\",\"id\":2,\"ips\":[\"0x10\"]}\n"
             "{\"type\":\"sym\",\"ip\":\"0x10\",\"fn\":\"\"}\n",
             (unsigned long long)ip_fn);
    CHECK(write_snapshot_with(in, 0, NULL, extra) == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s' -o '%s' 2>/dev/null", in, out), 0);
    size_t n = 0;
    char *text = slurp(out, &n);
    CHECK(text && strstr(text, "{\"type\":\"from_the_future\",\"k\":[1,2,3]}\n") != NULL);
    char nameless[128];
    snprintf(nameless, sizeof nameless, "\"ip\":\"0x%llx\",\"fn\":\"\"",
             (unsigned long long)ip_fn);
    CHECK(text && strstr(text, nameless) == NULL);
    CHECK(text && strstr(text, "\"ip\":\"0x10\",\"fn\":\"\"") != NULL);
    free(text);
    found f;
    CHECK(read_syms(out, &f) == 0);
    CHECK_EQ_U64(f.syms, 3);     /* ip_fn, ip_ret named; 0x10 nameless, kept */
    CHECK(strcmp(f.fn0, "known_function") == 0);
}

/* In place through a symbolic link: the file it names is rewritten, the
 * link stays a link (`symbolize /dev/stdin < SNAP` put a file at
 * /dev/stdin: the temporary file was renamed over the link). */
static void test_cli_symlink(void)
{
    char in[1024], link[1024];
    snprintf(in, sizeof in, "%s/sym_target.msnap", dir);
    snprintf(link, sizeof link, "%s/sym_link.msnap", dir);
    CHECK(write_snapshot(in, 0, NULL) == 0);
    unlink(link);
    CHECK(symlink("sym_target.msnap", link) == 0);
    CHECK_EQ_U64(sh("'%s' symbolize '%s' 2>/dev/null%s", link, ""), 0);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    found f;
    CHECK(read_syms(in, &f) == 0);
    CHECK_EQ_U64(f.syms, 2);
    CHECK(strcmp(f.fn0, "known_function") == 0);
}

/* The whole of a command's stderr (its first 64 KiB) and exit status. */
static int run_err(const char *cmd, char *err, size_t cap)
{
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1 >/dev/null", cmd);
    FILE *p = popen(full, "r");
    size_t n = p ? fread(err, 1, cap - 1, p) : 0;
    err[n] = 0;
    int st = p ? pclose(p) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* A recording from another machine: 300 modules this machine does not
 * have give one line, not 300 (issue 35 item 10). */
static void test_many_missing(void)
{
    char in[1024], out[1024], extra[300 * 96 + 1] = "", cmd[4096], err[65536];
    snprintf(in, sizeof in, "%s/sym_missing.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_missing_out.msnap", dir);
    for (int i = 0; i < 300; i++) {
        size_t l = strlen(extra);
        snprintf(extra + l, sizeof extra - l, "{\"type\":\"module\",\"base\":\"0x%x\",\"size\":4096,"
                 "\"path\":\"/nonexistent/other-machine/lib%d.so\"}\n", 0x10000000 + i * 0x10000, i);
    }
    CHECK(write_snapshot_with(in, 0, NULL, extra) == 0);
    snprintf(cmd, sizeof cmd, "'%s' symbolize '%s' -o '%s'", memsnap, in, out);
    CHECK_EQ_U64(run_err(cmd, err, sizeof err), 0);
    CHECK_EQ_U64(count_lines(err), 1);
    CHECK(strstr(err, "; 300 modules not on this machine (/nonexistent/other-machine/lib0.so, "
                      "...; --search DIR looks in a folder of the original binaries)") != NULL);
    if (count_lines(err) != 1)
        fprintf(stderr, "stderr was:\n%s", err);
    found f;
    CHECK(read_syms(out, &f) == 0);
    CHECK(strcmp(f.fn0, "known_function") == 0);   /* this program's own still resolve */
}

/* --search DIR: this program recorded at a path this machine lacks, its
 * binary in a folder given by --search (issue 35 item 10). */
static void test_search(void)
{
    char exe[1024], moved[1200], bins[1024], copy[2200], in[1024], out[1024], cmd[8192];
    char err[65536];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = 0;
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    snprintf(moved, sizeof moved, "/nonexistent/build-host/bin/%s", base);
    snprintf(bins, sizeof bins, "%s/sym_bins", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/deep/er' && cp '%s' '%s/deep/er/'",
             bins, bins, exe, bins);
    CHECK(system(cmd) == 0);
    snprintf(copy, sizeof copy, "%s/deep/er/%s", bins, base);
    snprintf(in, sizeof in, "%s/sym_moved.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_moved_out.msnap", dir);
    extra_modules.move_from = exe;
    extra_modules.move_to = moved;
    CHECK(write_snapshot(in, 0, NULL) == 0);
    extra_modules.move_from = extra_modules.move_to = NULL;
    found f;
    snprintf(cmd, sizeof cmd, "'%s' symbolize '%s' -o '%s'", memsnap, in, out);
    CHECK_EQ_U64(run_err(cmd, err, sizeof err), 0);
    CHECK(read_syms(out, &f) == 0);
    CHECK(f.fn0[0] == '\0');                      /* not on this machine */
    CHECK(strstr(err, "1 module not on this machine (/nonexistent/build-host/bin/") != NULL);
    snprintf(cmd, sizeof cmd, "'%s' symbolize '%s' -o '%s' --search '%s'", memsnap, in, out, bins);
    CHECK_EQ_U64(run_err(cmd, err, sizeof err), 0);
    CHECK_EQ_U64(count_lines(err), 1);
    CHECK(strstr(err, "; 1 found under --search") != NULL);
    CHECK(read_syms(out, &f) == 0);
    CHECK(strcmp(f.fn0, "known_function") == 0);
    CHECK(strcmp(f.fn1, "main") == 0);
    CHECK_EQ_U64(f.line1, call_line);
    /* a folder that is not one: a usage error */
    snprintf(cmd, sizeof cmd, "'%s' symbolize '%s' -o '%s' --search '%s'", memsnap, in, out, copy);
    CHECK_EQ_U64(run_err(cmd, err, sizeof err), 2);
    CHECK(strstr(err, "is not a folder") != NULL);
}

/* A module path that names a FIFO is refused at once, never opened to
 * wait on (issue 35 item 18; the hostile file symbolize-fifo-module). */
static void test_fifo_module(void)
{
    char fifo[1024], in[1024], out[1024], extra[2048], cmd[4096], err[65536];
    snprintf(fifo, sizeof fifo, "%s/sym_fifo", dir);
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(extra, sizeof extra, "{\"type\":\"module\",\"base\":\"0x7000000\",\"size\":4096,"
             "\"path\":\"%s\"}\n", fifo);
    snprintf(in, sizeof in, "%s/sym_fifo.msnap", dir);
    snprintf(out, sizeof out, "%s/sym_fifo_out.msnap", dir);
    CHECK(write_snapshot_with(in, 0, NULL, extra) == 0);
    /* timeout: before the fix it blocked for ever in open(2) */
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' symbolize '%s' -o '%s'", memsnap, in, out);
    CHECK_EQ_U64(run_err(cmd, err, sizeof err), 0);
    CHECK(strstr(err, "1 unusable (") != NULL && strstr(err, "not a regular file") != NULL);
    unlink(fifo);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MEMSNAP SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    memsnap = argv[1];
    dir = argv[2];
    ip_fn = (uint64_t)(uintptr_t)known_function + 1;
    void *ra;
    ra = known_function(); call_line = __LINE__;
    ip_ret = (uint64_t)(uintptr_t)ra;
    test_library();
    test_cli_plain();
    test_cli_in_place_zstd();
    test_build_id_mismatch();
    test_cli_stdin();
    test_cli_lines_kept();
    test_cli_symlink();
    test_many_missing();
    test_search();
    test_fifo_module();
    return check_summary();
}
