/* memsnap symbolize: attach function, file and line to every instruction
 * pointer of a snapshot's stacks, offline.
 *
 * Two passes over the input:
 *   1. msnap_reader: collect every IP of every "stack" record, every
 *      "module" record (path, load bias, build-id), and the IPs that already
 *      have a "sym" record with a function name (those are kept as they are,
 *      so running symbolize twice changes nothing).
 *   2. Resolve the remaining IPs with the symbolizer library (symbolize/,
 *      libdwfl), then copy the input's lines byte for byte to the output and
 *      append one "sym" record per resolved IP.  Old "sym" lines without a
 *      function name for an IP resolved again are dropped.
 *
 * Return addresses: every native frame of a recorded stack is a return
 * address, the innermost one too (the recorder unwinds from inside its hook,
 * so frame 0 is where the program's call into the driver or allocator
 * returns to), and is looked up at ip - 1 (the call instruction), which
 * gives the line of the call.  The recorder's own symbolization at exit
 * (recorder/writer.c, write_symbols) does the same, so a file symbolized
 * later reads exactly like one symbolized at recording time.
 *
 * Output: -o OUT ("-" = stdout), else the input is rewritten in place
 * through a temporary file in the same directory and rename(2), so a reader
 * never sees half a file.  In place, a file with nothing to resolve (every
 * IP already has a sym record, and none without a name gets one now) is
 * left untouched, inode and mtime included, with one line saying so.  The output is zstd-compressed when the input was.
 * A cut-off last line of the input (the process died mid-write) is dropped.
 *
 * Exit status: 0 ok (unresolvable IPs are not an error: they get a sym
 * record with an empty function), 2 usage error or unreadable input /
 * unwritable output.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "cli.h"
#include "memsnap/format.h"
#include "symbolize.h"
#include "u64map.h"
#include "outfile.h"
#include "options.h"

static const char usage_text[] =
    "usage: memsnap symbolize SNAP [-o OUT | --in-place]\n"
    "\n"
    "Resolves every instruction pointer in SNAP's stacks to function,\n"
    "file:line (elfutils, DWARF; the binaries named in the snapshot's module\n"
    "records must exist on this machine, with the same build-id) and adds a\n"
    "\"sym\" record per IP.  Every frame is a return address and is looked up\n"
    "at ip-1, as the recorder does.  IPs that already have a named sym record\n"
    "are kept.\n"
    "\n"
    "  -o, --output OUT   write to OUT (\"-\" = stdout) instead of SNAP\n"
    "  -i, --in-place     rewrite SNAP through a temporary file + rename\n"
    "                     (the default)\n"
    "  -h, --help         this help\n"
    "\n"
    "The output is zstd-compressed when SNAP is.  Exit status: 0 ok, 2 bad\n"
    "usage, unreadable input or unwritable output.\n";

/* Per-IP flags in the collection map: in a stack (so a return address),
 * has a sym record with a function name, has a sym record (named or not). */
enum { IP_FRAME = 1, IP_NAMED = 2, IP_SYM = 4 };

typedef struct module_rec {
    char *path, *build_id;
    uint64_t base, size;
} module_rec;

typedef struct collected {
    u64map ips;          /* ip -> IP_* flags */
    module_rec *mods;
    size_t nmods, cap_mods;
    int truncated;
    uint64_t lines;
} collected;

/* Pass 1: fills c from the snapshot at path.  0 ok, 2 with err set. */
static int collect(const char *path, collected *c, char *err, size_t errlen)
{
    char rerr[512] = "";
    msnap_reader *r = msnap_reader_open(path, rerr, sizeof rerr);
    if (!r) {
        snprintf(err, errlen, "%s: %s", path, rerr);
        return 2;
    }
    msnap_record rec;
    int rc;
    while ((rc = msnap_reader_next(r, &rec)) == 1) {
        c->lines = rec.line;
        if (rec.type == MSNAP_REC_STACK) {
            for (int i = 0; i < rec.u.stack.depth; i++) {
                uint64_t ip = rec.u.stack.ips[i];
                uint64_t *v = u64map_get(&c->ips, 0, ip);
                uint64_t f = (v ? *v : 0) | IP_FRAME;
                if (u64map_put(&c->ips, 0, ip, f))
                    goto oom;
            }
        } else if (rec.type == MSNAP_REC_SYMBOL) {
            int is_named = rec.u.symbol.function && rec.u.symbol.function[0];
            uint64_t *v = u64map_get(&c->ips, 0, rec.u.symbol.ip);
            if (u64map_put(&c->ips, 0, rec.u.symbol.ip,
                           (v ? *v : 0) | IP_SYM | (is_named ? IP_NAMED : 0)))
                goto oom;
        } else if (rec.type == MSNAP_REC_MODULE) {
            const msnap_module *m = &rec.u.module;
            int dup = 0;
            for (size_t i = 0; i < c->nmods && !dup; i++)
                dup = c->mods[i].base == m->base &&
                      strcmp(c->mods[i].path, m->path ? m->path : "") == 0;
            if (dup)
                continue;
            if (c->nmods == c->cap_mods) {
                size_t ncap = c->cap_mods ? 2 * c->cap_mods : 32;
                module_rec *nm = realloc(c->mods, ncap * sizeof *nm);
                if (!nm)
                    goto oom;
                c->mods = nm;
                c->cap_mods = ncap;
            }
            module_rec *d = &c->mods[c->nmods];
            d->path = strdup(m->path ? m->path : "");
            d->build_id = strdup(m->build_id ? m->build_id : "");
            d->base = m->base;
            d->size = m->size;
            if (!d->path || !d->build_id) {
                free(d->path);
                free(d->build_id);
                goto oom;
            }
            c->nmods++;
        }
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", path, msnap_reader_error(r));
        msnap_reader_close(r);
        return 2;
    }
    c->truncated = msnap_reader_truncated(r);
    msnap_reader_close(r);
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory", path);
    msnap_reader_close(r);
    return 2;
}

/* Frees what collect allocated. */
static void collected_free(collected *c)
{
    u64map_free(&c->ips);
    for (size_t i = 0; i < c->nmods; i++) {
        free(c->mods[i].path);
        free(c->mods[i].build_id);
    }
    free(c->mods);
}

/* ---- pass 2: copy lines ------------------------------------------------- */

/* A raw line source over a plain or zstd file (the decoded text). */
typedef struct line_src {
    int fd;
    int zstd;
    ZSTD_DCtx *dctx;
    char *in;
    size_t in_len, in_pos, in_cap;
    char *buf;           /* decoded text; [start, end) not yet consumed */
    size_t start, end, cap;
    int eof;
} line_src;

/* Opens path; detects zstd from the first 4 bytes.  0 ok, -1 errno set. */
static int src_open(line_src *s, const char *path)
{
    static const unsigned char magic[4] = {0x28, 0xB5, 0x2F, 0xFD};
    memset(s, 0, sizeof *s);
    s->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0)
        return -1;
    s->cap = 1 << 20;
    s->in_cap = ZSTD_DStreamInSize();
    s->buf = malloc(s->cap);
    s->in = malloc(s->in_cap);
    if (!s->buf || !s->in)
        return errno = ENOMEM, -1;
    ssize_t n = read(s->fd, s->in, 4);
    if (n < 0)
        return -1;
    s->in_len = (size_t)n;
    if (n == 4 && memcmp(s->in, magic, 4) == 0) {
        s->zstd = 1;
        s->dctx = ZSTD_createDCtx();
        if (!s->dctx)
            return errno = ENOMEM, -1;
    } else {
        memcpy(s->buf, s->in, (size_t)n);
        s->end = (size_t)n;
        s->in_len = 0;
    }
    return 0;
}

/* Adds decoded text to the buffer (growing it as needed).  Returns 1 when
 * something was added, 0 at end of input, -1 on error (errno, or EIO for
 * corrupt zstd data). */
static int src_fill(line_src *s)
{
    if (s->start > 0) {
        memmove(s->buf, s->buf + s->start, s->end - s->start);
        s->end -= s->start;
        s->start = 0;
    }
    if (s->end == s->cap) {
        char *nb = realloc(s->buf, s->cap * 2);
        if (!nb)
            return errno = ENOMEM, -1;
        s->buf = nb;
        s->cap *= 2;
    }
    for (;;) {
        if (!s->zstd) {
            ssize_t n = read(s->fd, s->buf + s->end, s->cap - s->end);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -1;
            s->end += (size_t)n;
            return n > 0;
        }
        if (s->in_pos == s->in_len) {
            ssize_t n = read(s->fd, s->in, s->in_cap);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -1;
            if (n == 0)
                return 0; /* a stream that just stops: the reader's policy */
            s->in_len = (size_t)n;
            s->in_pos = 0;
        }
        ZSTD_inBuffer ib = {s->in, s->in_len, s->in_pos};
        ZSTD_outBuffer ob = {s->buf + s->end, s->cap - s->end, 0};
        size_t z = ZSTD_decompressStream(s->dctx, &ob, &ib);
        if (ZSTD_isError(z))
            return errno = EIO, -1;
        s->in_pos = ib.pos;
        s->end += ob.pos;
        if (ob.pos)
            return 1;
    }
}

/* Next line without its '\n' in line/len (valid until the next call).
 * Returns 1 for a line, 2 for a last line with no '\n', 0 at end, -1 on
 * error. */
static int src_line(line_src *s, char **line, size_t *len)
{
    for (;;) {
        char *nl = memchr(s->buf + s->start, '\n', s->end - s->start);
        if (nl) {
            *line = s->buf + s->start;
            *len = (size_t)(nl - *line);
            s->start += *len + 1;
            return 1;
        }
        int f = src_fill(s);
        if (f < 0)
            return -1;
        if (f == 0) {
            if (s->end == s->start)
                return 0;
            *line = s->buf + s->start;
            *len = s->end - s->start;
            s->start = s->end;
            return 2;
        }
    }
}

static void src_close(line_src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    ZSTD_freeDCtx(s->dctx);
    free(s->in);
    free(s->buf);
}

/* The IP of a line written as {"type":"sym","ip":...} by msnap_fmt_symbol;
 * 0 when the line is not such a line. */
static int sym_line_ip(const char *line, size_t len, uint64_t *ip)
{
    static const char prefix[] = "{\"type\":\"sym\",";
    if (len < sizeof prefix - 1 || memcmp(line, prefix, sizeof prefix - 1))
        return 0;
    char *copy = strndup(line, len);
    cJSON *o = copy ? cJSON_Parse(copy) : NULL;
    free(copy);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "ip");
    int ok = 1;
    if (cJSON_IsString(v))
        *ip = strtoull(v->valuestring, NULL, 0);
    else if (cJSON_IsNumber(v))
        *ip = (uint64_t)v->valuedouble;
    else
        ok = 0;
    cJSON_Delete(o);
    return ok;
}

/* Whether a line parses as a JSON object (for a last line without '\n'). */
static int is_json_object(const char *line, size_t len)
{
    char *copy = strndup(line, len);
    cJSON *o = copy ? cJSON_Parse(copy) : NULL;
    int ok = cJSON_IsObject(o);
    cJSON_Delete(o);
    free(copy);
    return ok;
}

/* Pass 2: copies the input lines to out (dropping nameless sym lines of IPs
 * in resolved) and appends one sym line per entry of syms.  0 ok, -1 with
 * err set. */
static int write_output(const char *in_path, msnap_out *out,
                        const msnap_symbol *syms, size_t nsyms,
                        u64map *resolved, char *err, size_t errlen)
{
    line_src src;
    if (src_open(&src, in_path) != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", in_path, strerror(errno));
        src_close(&src);
        return -1;
    }
    char *line;
    size_t len;
    int rc;
    while ((rc = src_line(&src, &line, &len)) > 0) {
        uint64_t ip;
        if (sym_line_ip(line, len, &ip) && u64map_get(resolved, 0, ip))
            continue;
        if (rc == 2 && !is_json_object(line, len))
            break; /* a cut-off last line */
        if (rc == 1 ? msnap_out_write(out, line, len + 1) /* with its '\n' */
                    : (msnap_out_write(out, line, len) ||
                       msnap_out_write(out, "\n", 1)))
            goto werr;
    }
    if (rc < 0) {
        snprintf(err, errlen, "%s: read error: %s", in_path, strerror(errno));
        src_close(&src);
        return -1;
    }
    src_close(&src);
    char buf[8192];
    for (size_t i = 0; i < nsyms; i++) {
        size_t n = msnap_fmt_symbol(buf, sizeof buf, &syms[i]);
        if (!n) { /* a name longer than 8 KiB: write it without the name */
            msnap_symbol short_sym = syms[i];
            short_sym.function = "";
            short_sym.file = "";
            n = msnap_fmt_symbol(buf, sizeof buf, &short_sym);
        }
        if (msnap_out_write(out, buf, n))
            goto werr_closed;
    }
    return 0;
werr:
    src_close(&src);
werr_closed:
    snprintf(err, errlen, "write error: %s", strerror(errno));
    return -1;
}

/* Whether the file at path starts with the zstd magic. */
static int file_is_zstd(const char *path)
{
    unsigned char m[4];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, m, 4);
    close(fd);
    return n == 4 && m[0] == 0x28 && m[1] == 0xB5 && m[2] == 0x2F &&
           m[3] == 0xFD;
}

/* memsnap symbolize: see usage_text.  Returns the process exit status. */
int cmd_symbolize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"in-place", no_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *out_path = NULL;
    int in_place = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:ih", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out_path = optarg; break;
        case 'i': in_place = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default:
            return cli_option_error("symbolize", argv, "o:ih", opts);
        }
    }
    if (argc - optind != 1)
        return cli_usage_error("symbolize", "expected one snapshot file, got %d", argc - optind);
    if (out_path && in_place)
        return cli_usage_error("symbolize", "-o and --in-place exclude each other");
    const char *in_path = argv[optind];
    struct stat st_in, st_out;
    if (out_path && strcmp(out_path, "-") && stat(in_path, &st_in) == 0 &&
        stat(out_path, &st_out) == 0 && st_in.st_dev == st_out.st_dev &&
        st_in.st_ino == st_out.st_ino)
        out_path = NULL; /* -o SNAP: same as in place (never truncate the
                            input before reading it) */
    if (!strcmp(in_path, "-")) {
        return cli_usage_error("symbolize", "reads its input twice, so it needs a file, not stdin");
    }

    int ret = 2;
    char err[1024] = "";
    collected col = {0};
    msnap_symbolizer *sy = NULL;
    msnap_symbol *syms = NULL;
    u64map resolved = {0};
    msnap_out *out = NULL;
    char *tmp_path = NULL;
    char out_tmp[PATH_MAX + 32] = "";   /* -o OUT: its temporary name (outfile.h) */
    int out_fd = -1;

    if (collect(in_path, &col, err, sizeof err))
        goto done;

    /* Nothing to look up: leave the file alone (no libdwfl, no rewrite). */
    size_t todo = 0, nframes = 0;
    for (size_t i = 0; i < col.ips.cap; i++) {
        const u64map_slot *sl = &col.ips.slots[i];
        if (sl->used && (sl->value & IP_FRAME)) {
            nframes++;
            todo += !(sl->value & IP_NAMED) && !msnap_ip_is_python(sl->key);
        }
    }
    if (!todo && !out_path) {
        fprintf(stderr, "memsnap symbolize: nothing to resolve in %s (%s); left as it was\n",
                in_path, nframes ? "every IP of its stacks has a name already" : "it has no stacks");
        ret = 0;
        goto done;
    }
    sy = msnap_symbolizer_new();
    if (!sy) {
        snprintf(err, sizeof err, "memsnap symbolize: cannot start libdwfl");
        goto done;
    }
    size_t mods_ok = 0;
    for (size_t i = 0; i < col.nmods; i++) {
        if (msnap_symbolizer_add_module(sy, col.mods[i].path, col.mods[i].base,
                                        col.mods[i].size,
                                        col.mods[i].build_id) == 0)
            mods_ok++;
        else
            fprintf(stderr, "memsnap symbolize: warning: %s\n",
                    msnap_symbolizer_error(sy));
    }

    size_t nsyms = 0, named = 0;
    syms = calloc(col.ips.n ? col.ips.n : 1, sizeof *syms);
    if (!syms) {
        snprintf(err, sizeof err, "memsnap symbolize: out of memory");
        goto done;
    }
    for (size_t i = 0; i < col.ips.cap; i++) {
        const u64map_slot *sl = &col.ips.slots[i];
        /* Python frames are not addresses: their sym lines, written by the
         * recorder, are the only names they have (and are kept). */
        if (!sl->used || (sl->value & IP_NAMED) ||
            !(sl->value & IP_FRAME) || msnap_ip_is_python(sl->key))
            continue;
        int got = msnap_symbolizer_resolve_frame(sy, sl->key, 1, &syms[nsyms]) > 0;
        /* no better than the nameless sym line already there: keep that one */
        if (!got && !syms[nsyms].file[0] && (sl->value & IP_SYM))
            continue;
        named += got;
        if (u64map_put(&resolved, 0, sl->key, 1)) {
            snprintf(err, sizeof err, "memsnap symbolize: out of memory");
            goto done;
        }
        nsyms++;
    }
    if (!nsyms && !out_path) {
        fprintf(stderr, "memsnap symbolize: nothing new resolved in %s (%zu of %zu modules "
                        "usable); left as it was\n", in_path, mods_ok, col.nmods);
        ret = 0;
        goto done;
    }

    if (col.truncated)
        fprintf(stderr, "memsnap symbolize: %s: file truncated after line %"
                PRIu64 " (the process probably died); the cut-off line is "
                "dropped\n", in_path, col.lines);

    /* Output: stdout, a named file, or a temporary file renamed over the
     * input.  Compression follows the input. */
    int level = file_is_zstd(in_path) ? 3 : 0;
    const char *target = out_path ? out_path : in_path;
    struct stat st;
    if (out_path && !strcmp(out_path, "-")) {
        out_fd = dup(STDOUT_FILENO);
    } else if (out_path) {
        /* a new file renamed over OUT at the end (outfile.h) */
        out_fd = outfile_create(out_path, out_tmp, sizeof out_tmp);
    } else {
        if (asprintf(&tmp_path, "%s.symtmp.XXXXXX", in_path) < 0) {
            tmp_path = NULL;
            snprintf(err, sizeof err, "memsnap symbolize: out of memory");
            goto done;
        }
        out_fd = mkstemp(tmp_path);
        if (out_fd >= 0 && stat(in_path, &st) == 0)
            fchmod(out_fd, st.st_mode & 07777);
    }
    if (out_fd < 0) {
        snprintf(err, sizeof err, "%s: cannot write: %s",
                 tmp_path ? tmp_path : target, strerror(errno));
        goto done;
    }
    out = msnap_out_fdopen(out_fd, level);
    if (!out) {
        snprintf(err, sizeof err, "%s: cannot write: %s", target,
                 strerror(errno));
        close(out_fd);
        goto done;
    }
    out_fd = -1; /* owned by out now */
    if (write_output(in_path, out, syms, nsyms, &resolved, err, sizeof err))
        goto done;
    int cl = msnap_out_close(out);
    out = NULL;
    if (cl) {
        snprintf(err, sizeof err, "%s: write error: %s", target,
                 strerror(errno));
        goto done;
    }
    if (out_tmp[0]) {
        if (outfile_commit(out_tmp, out_path) != 0) {
            snprintf(err, sizeof err, "%s: cannot write: %s", out_path, strerror(errno));
            goto done;
        }
        out_tmp[0] = 0;
    }
    if (tmp_path) {
        if (rename(tmp_path, in_path) != 0) {
            snprintf(err, sizeof err, "%s: cannot replace: %s", in_path,
                     strerror(errno));
            goto done;
        }
        free(tmp_path);
        tmp_path = NULL;
    }
    fprintf(stderr, "memsnap symbolize: %zu IPs resolved (%zu with a function "
            "name), %zu of %zu modules usable -> %s\n", nsyms, named, mods_ok,
            col.nmods, out_path && !strcmp(out_path, "-") ? "stdout" : target);
    ret = 0;
done:
    if (ret && err[0])
        fprintf(stderr, "%s\n", err);
    if (out)
        msnap_out_close(out);
    if (out_fd >= 0)
        close(out_fd);
    if (tmp_path) {
        unlink(tmp_path);
        free(tmp_path);
    }
    outfile_discard(out_tmp);
    u64map_free(&resolved);
    free(syms);
    msnap_symbolizer_free(sy);
    collected_free(&col);
    return ret;
}
