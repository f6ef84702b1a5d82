/* memsnap symbolize: attach function, file and line to every instruction
 * pointer of a snapshot's stacks, offline.
 *
 * One read of the input, through the analysis library (analyze/analysis.h,
 * an_want_text), so `memsnap symbolize - -o OUT` reads a pipe as it reads
 * a file:
 *   - each line is copied to the output as it passes (a line of a type this
 *     version does not know included), except a sym line without a function
 *     name, which is held back: a better answer found now replaces it;
 *   - the read's tables give every IP of every stack, the sym records
 *     (symtab.h: a named one wins) and the module records (path, load bias,
 *     build-id).
 * Then the IPs without a named sym record are resolved with the symbolizer
 * library (symbolize/, libdwfl), and the held-back nameless sym lines that
 * got no better answer, then one sym line per IP resolved now, are appended.
 * Where a sym line stands in the file does not matter to a reader.  IPs
 * that already have a named sym record are kept as they are, so running
 * symbolize twice changes nothing.
 *
 * Return addresses: every native frame of a recorded stack is a return
 * address, the innermost one too (the recorder unwinds from inside its hook,
 * so frame 0 is where the program's call into the driver or allocator
 * returns to), and is looked up at ip - 1 (the call instruction), which
 * gives the line of the call.  The recorder's own symbolization at exit
 * (recorder/writer.c, write_symbols) does the same, so a file symbolized
 * later reads exactly like one symbolized at recording time.
 *
 * Output: -o OUT ("-" = stdout), else the input is rewritten in place: the
 * copy goes to a temporary file in the same directory, renamed over the
 * input at the end, so a reader never sees half a file; a symbolic link is
 * followed, so the file it names is rewritten and the link stays a link
 * (`symbolize /dev/stdin` must never put a file at /dev/stdin).  In place, a file
 * with nothing to resolve (every IP already has a sym record, and none
 * without a name gets one now) is left untouched, inode and mtime included,
 * with one line saying so (the temporary copy is removed).  Standard input
 * has no file to rewrite, so it needs -o.  The output is zstd-compressed
 * when the input was.  A cut-off last line of the input (the process died
 * mid-write) is dropped; trailing blanks of a line are not copied.
 *
 * Exit status: 0 ok (unresolvable IPs are not an error: they get a sym
 * record with an empty function), 2 usage error or unreadable input /
 * unwritable output.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analysis.h"
#include "cli.h"
#include "memsnap/format.h"
#include "options.h"
#include "util/outfile.h"
#include "symbolize/symbolize.h"
#include "util/u64map.h"

static const char usage_text[] =
    "usage: memsnap symbolize SNAP [-o OUT | --in-place] [--search DIR...]\n"
    "       memsnap symbolize - -o OUT\n"
    "\n"
    "Resolves every instruction pointer in SNAP's stacks to function,\n"
    "file:line (elfutils, DWARF; the binaries named in the snapshot's module\n"
    "records must exist on this machine, with the same build-id) and adds a\n"
    "\"sym\" record per IP.  Every frame is a return address and is looked up\n"
    "at ip-1, as the recorder does.  IPs that already have a named sym record\n"
    "are kept.  SNAP is read once; \"-\" reads standard input, which needs -o.\n"
    "\n"
    "  -o, --output OUT   write to OUT (\"-\" = stdout) instead of SNAP\n"
    "  -i, --in-place     rewrite SNAP through a temporary file + rename\n"
    "                     (the default for a file)\n"
    "  -s, --search DIR   where the recording's binaries are not at their paths\n"
    "                     (a recording from another machine), look for them in\n"
    "                     DIR: DIR/PATH, then any file of the same name under\n"
    "                     DIR (its build-id must match); up to 8 folders\n"
    "  -h, --help         this help\n"
    "\n"
    "Modules that cannot be used are counted by why (not on this machine,\n"
    "changed since the recording, unusable) in the one line at the end; the\n"
    "recording's own sym records stay.\n"
    "The output is zstd-compressed when SNAP is.  Exit status: 0 ok, 2 bad\n"
    "usage, unreadable input or unwritable output.\n";

/* A sym line without a function name, held back until the end. */
typedef struct held_sym {
    uint64_t ip;
    char *text;
    size_t len;
} held_sym;

/* The copy of the input's lines to the output (an observer of the read). */
typedef struct sy_copy {
    int fd;              /* the output until out owns it (-1 then) */
    msnap_out *out;      /* made at the first record: the level follows the input */
    int werr;            /* errno of a failed write, 0 when none */
    held_sym *held;
    size_t nheld, cap_held;
} sy_copy;

/* Writes one line and its '\n'.  0, or -1 with errno. */
static int put_line(msnap_out *out, const char *text, size_t len)
{
    return msnap_out_write(out, text, len) || msnap_out_write(out, "\n", 1) ? -1 : 0;
}

/* an_observer.record: copies r's line to the output, or holds it back (a
 * nameless sym line).  -1 stops the read (out of memory, write error). */
static int copy_record(void *ctx, an_file *f, const msnap_record *r)
{
    sy_copy *c = ctx;
    if (!c->out) {
        c->out = msnap_out_fdopen(c->fd, f->zstd ? 3 : 0);
        if (!c->out) {
            c->werr = errno ? errno : ENOMEM;
            return -1;
        }
        c->fd = -1;
    }
    if (r->type == MSNAP_REC_SYMBOL && !(r->u.symbol.function && r->u.symbol.function[0])) {
        if (msnap_grow((void **)&c->held, &c->cap_held, c->nheld, sizeof *c->held))
            return -1;
        held_sym *h = &c->held[c->nheld];
        h->text = strndup(r->text, r->text_len);
        if (!h->text)
            return -1;
        h->ip = r->u.symbol.ip;
        h->len = r->text_len;
        c->nheld++;
        return 0;
    }
    if (put_line(c->out, r->text, r->text_len)) {
        c->werr = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

/* The IPs to look up: every native frame of every stack in the tables
 * without a named sym record, once each (the stacks the read made for
 * PyTorch's backward hold frames of the file's stacks and autograd frames,
 * which are not addresses, as Python frames are not).  *nframes: the
 * distinct native frames.  0 ok, -1 out of memory. */
static int ips_to_resolve(const sm_symtab *t, uint64_t **out, size_t *n, size_t *nframes)
{
    u64map seen = {0};
    size_t cap = 0;
    *out = NULL;
    *n = *nframes = 0;
    for (size_t s = 0; s < t->nstacks; s++)
        for (int i = 0; i < t->stacks[s].depth; i++) {
            uint64_t ip = t->stacks[s].ips[i];
            if (msnap_ip_is_python(ip) || u64map_get(&seen, 0, ip))
                continue;
            if (u64map_put(&seen, 0, ip, 1))
                goto oom;
            ++*nframes;
            const uint64_t *y = u64map_get(&t->sym_map, 0, ip);
            if (y && t->syms[*y].fn[0])
                continue;
            if (msnap_grow((void **)out, &cap, *n, sizeof **out))
                goto oom;
            (*out)[(*n)++] = ip;
        }
    u64map_free(&seen);
    return 0;
oom:
    u64map_free(&seen);
    free(*out);
    *out = NULL;
    return -1;
}

/* --search DIR: the regular files under each folder (up to SEARCH_DEPTH
 * deep, links not followed), by base name, for the modules a recording
 * names at paths this machine does not have. */
#define MAX_SEARCH 8
#define SEARCH_DEPTH 8
typedef struct search_ix {
    const char *dirs[MAX_SEARCH];
    int ndirs;
    char **paths;                  /* every regular file found */
    size_t n, cap;
} search_ix;

static void search_walk(search_ix *x, const char *dir, int depth)
{
    DIR *d = depth <= SEARCH_DEPTH ? opendir(dir) : NULL;
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[PATH_MAX];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= sizeof p)
            continue;
        struct stat st;
        if (lstat(p, &st))
            continue;
        if (S_ISDIR(st.st_mode)) {
            search_walk(x, p, depth + 1);
        } else if (S_ISREG(st.st_mode) &&
                   !msnap_grow((void **)&x->paths, &x->cap, x->n, sizeof *x->paths)) {
            if ((x->paths[x->n] = strdup(p)))
                x->n++;
        }
    }
    closedir(d);
}

static void search_free(search_ix *x)
{
    for (size_t i = 0; i < x->n; i++)
        free(x->paths[i]);
    free(x->paths);
}

/* Tries a module at the paths --search gives for it: DIR/PATH (a copy of
 * the other machine's tree), then every file of the same base name under
 * each DIR.  The symbolizer refuses one whose build-id differs, so the
 * first it takes is the binary of the recording.  1 found, 0 not. */
static int add_from_search(msnap_symbolizer *sy, const search_ix *x, const sm_module *m)
{
    char p[PATH_MAX];
    for (int i = 0; i < x->ndirs; i++)
        if ((size_t)snprintf(p, sizeof p, "%s/%s", x->dirs[i], m->path) < sizeof p &&
            msnap_symbolizer_add_module(sy, p, m->base, m->size, m->build_id) == 0)
            return 1;
    const char *b = strrchr(m->path, '/');
    b = b ? b + 1 : m->path;
    for (size_t i = 0; *b && i < x->n; i++) {
        const char *q = strrchr(x->paths[i], '/');
        if (q && !strcmp(q + 1, b) &&
            msnap_symbolizer_add_module(sy, x->paths[i], m->base, m->size, m->build_id) == 0)
            return 1;
    }
    return 0;
}

/* What became of the file's modules. */
typedef struct mod_counts {
    size_t tried, ok, searched;          /* searched: found under --search */
    size_t missing, changed, unusable;   /* msnap_symbolizer_error_kind */
    char first_missing[512], first_changed[512], first_unusable[600];
} mod_counts;

/* Reports the file's module records to the symbolizer, each (path, base)
 * once, the ones not on this machine looked for under --search; what
 * failed is counted by kind (one line at the end says it all, however many
 * modules a recording from another machine names). */
static void add_modules(msnap_symbolizer *sy, const sm_symtab *t, const search_ix *x,
                        mod_counts *c)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < t->nmods; i++) {
        const sm_module *m = &t->mods[i];
        int dup = 0;
        for (size_t j = 0; j < i && !dup; j++)
            dup = t->mods[j].base == m->base && strcmp(t->mods[j].path, m->path) == 0;
        if (dup)
            continue;
        c->tried++;
        if (msnap_symbolizer_add_module(sy, m->path, m->base, m->size, m->build_id) == 0) {
            c->ok++;
            continue;
        }
        int kind = msnap_symbolizer_error_kind(sy);
        char why[600];
        snprintf(why, sizeof why, "%s", msnap_symbolizer_error(sy));
        if (kind != MSNAP_SYM_ERR_UNUSABLE && add_from_search(sy, x, m)) {
            c->ok++;
            c->searched++;
            continue;
        }
        if (kind == MSNAP_SYM_ERR_MISSING) {
            if (!c->missing++)
                snprintf(c->first_missing, sizeof c->first_missing, "%s", m->path);
        } else if (kind == MSNAP_SYM_ERR_CHANGED) {
            if (!c->changed++)
                snprintf(c->first_changed, sizeof c->first_changed, "%s", m->path);
        } else if (!c->unusable++) {
            snprintf(c->first_unusable, sizeof c->first_unusable, "%s", why);
        }
    }
}

/* "; 293 modules not on this machine (/opt/x/lib.so, ...: --search DIR
 * finds a folder of the original binaries), 1 changed since the
 * recording (...), 1 unusable (...)" into buf; "" when every module was
 * used. */
static void modules_note(const mod_counts *c, int searched, char *buf, size_t n)
{
    buf[0] = 0;
    size_t l;
    if (c->searched) {
        l = strlen(buf);
        snprintf(buf + l, n - l, "; %zu found under --search", c->searched);
    }
    if (c->missing) {
        l = strlen(buf);
        snprintf(buf + l, n - l, "; %zu module%s not on this machine (%s%s; %s)", c->missing,
                 c->missing == 1 ? "" : "s", c->first_missing, c->missing > 1 ? ", ..." : "",
                 searched ? "nor under --search" : "--search DIR looks in a folder of the "
                                                   "original binaries");
    }
    if (c->changed) {
        l = strlen(buf);
        snprintf(buf + l, n - l, "; %zu changed since the recording (%s%s: another build-id)",
                 c->changed, c->first_changed, c->changed > 1 ? ", ..." : "");
    }
    if (c->unusable) {
        l = strlen(buf);
        snprintf(buf + l, n - l, "; %zu unusable (%s%s)", c->unusable, c->first_unusable,
                 c->unusable > 1 ? ", ..." : "");
    }
}

/* memsnap symbolize: see usage_text.  Returns the process exit status. */
int cmd_symbolize(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"in-place", no_argument, NULL, 'i'},
        {"search", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *out_path = NULL;
    int in_place = 0, c;
    search_ix search = {0};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:ih", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out_path = optarg; break;
        case 'i': in_place = 1; break;
        case 's': {
            struct stat sd;
            if (search.ndirs == MAX_SEARCH)
                return cli_usage_error("symbolize", "at most %d --search folders", MAX_SEARCH);
            if (stat(optarg, &sd) || !S_ISDIR(sd.st_mode))
                return cli_usage_error("symbolize", "--search \"%s\" is not a folder", optarg);
            search.dirs[search.ndirs++] = optarg;
            break;
        }
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
    int from_stdin = !strcmp(in_path, "-");
    if (from_stdin && !out_path)
        return cli_usage_error("symbolize", "standard input cannot be rewritten in place; "
                               "give -o OUT (\"-o -\" for standard output)");
    struct stat st_in, st_out;
    int have_in = !from_stdin && stat(in_path, &st_in) == 0;
    if (have_in && out_path && strcmp(out_path, "-") && stat(out_path, &st_out) == 0 &&
        st_in.st_dev == st_out.st_dev && st_in.st_ino == st_out.st_ino)
        out_path = NULL; /* -o SNAP: same as in place (never truncate the
                            input before reading it) */
    if (!out_path && have_in && !S_ISREG(st_in.st_mode))
        return cli_usage_error("symbolize", "%s is not a regular file, so it cannot be "
                               "rewritten in place; give -o OUT", in_path);

    int ret = 2;
    char err[1024] = "";
    an_file f;
    an_init(&f, in_path);
    sy_copy copy = {.fd = -1};
    msnap_symbolizer *sy = NULL;
    msnap_symbol *syms = NULL;
    uint64_t *todo = NULL;
    u64map resolved = {0};
    char tmp[PATH_MAX + 32] = "";   /* the temporary file renamed into place */
    char *real = NULL;              /* in place: the file a link names */
    const char *target = out_path ? out_path : in_path;
    int to_stdout = out_path && !strcmp(out_path, "-");

    /* The output first, so the read copies the lines as it passes them:
     * stdout, a new file renamed over OUT (util/outfile.h), or a new file in
     * the input's folder renamed over it (with the input's mode). */
    if (to_stdout) {
        copy.fd = dup(STDOUT_FILENO);
    } else if (out_path) {
        copy.fd = outfile_create(out_path, OUTFILE_REPLACE_LINK, tmp, sizeof tmp);
    } else if (!(real = realpath(in_path, NULL))) {
        snprintf(err, sizeof err, "%s: cannot open: %s", in_path, strerror(errno));
        goto done;
    } else if ((size_t)snprintf(tmp, sizeof tmp, "%s.symtmp.XXXXXX", real) >= sizeof tmp) {
        tmp[0] = 0;
        errno = ENAMETOOLONG;
    } else {
        target = real;
        copy.fd = outfile_open_new(tmp);
        if (copy.fd < 0)
            tmp[0] = 0;
        else if (have_in)
            fchmod(copy.fd, st_in.st_mode & 07777);
    }
    if (copy.fd < 0) {
        snprintf(err, sizeof err, "%s: cannot write: %s", tmp[0] ? tmp : target, strerror(errno));
        goto done;
    }

    static const an_observer copier = {.record = copy_record};
    an_observer o = copier;
    o.ctx = &copy;
    an_want_text(&f);
    an_observe(&f, &o);
    if (an_read(&f, err, sizeof err)) {
        if (copy.werr)
            snprintf(err, sizeof err, "%s: write error: %s", target, strerror(copy.werr));
        goto done;
    }

    /* Nothing to look up: leave the file alone (no libdwfl, no rewrite). */
    size_t ntodo, nframes;
    if (ips_to_resolve(&f.tab, &todo, &ntodo, &nframes)) {
        snprintf(err, sizeof err, "memsnap symbolize: out of memory");
        goto done;
    }
    if (!ntodo && !out_path) {
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
    for (int i = 0; i < search.ndirs; i++)
        search_walk(&search, search.dirs[i], 0);
    mod_counts mc;
    add_modules(sy, &f.tab, &search, &mc);
    char note[2048];
    modules_note(&mc, search.ndirs > 0, note, sizeof note);

    size_t nsyms = 0, named = 0;
    syms = calloc(ntodo ? ntodo : 1, sizeof *syms);
    if (!syms) {
        snprintf(err, sizeof err, "memsnap symbolize: out of memory");
        goto done;
    }
    for (size_t i = 0; i < ntodo; i++) {
        uint64_t ip = todo[i];
        int got = msnap_symbolizer_resolve_frame(sy, ip, 1, &syms[nsyms]) > 0;
        /* no better than the nameless sym line already there: keep that one */
        if (!got && !syms[nsyms].file[0] && u64map_get(&f.tab.sym_map, 0, ip))
            continue;
        named += got;
        if (u64map_put(&resolved, 0, ip, 1)) {
            snprintf(err, sizeof err, "memsnap symbolize: out of memory");
            goto done;
        }
        nsyms++;
    }
    if (!nsyms && !out_path) {
        fprintf(stderr, "memsnap symbolize: nothing new resolved in %s (%zu of %zu modules "
                        "usable%s); the recording's own symbols kept, left as it was\n",
                in_path, mc.ok, mc.tried, note);
        ret = 0;
        goto done;
    }
    if (f.truncated)
        fprintf(stderr, "memsnap symbolize: %s: file truncated after line %" PRIu64
                " (the process probably died); the cut-off line is dropped\n",
                in_path, f.lines);

    /* The held-back nameless sym lines no answer replaced, then the new
     * sym lines. */
    char buf[8192];
    for (size_t i = 0; i < copy.nheld; i++)
        if (!u64map_get(&resolved, 0, copy.held[i].ip) &&
            put_line(copy.out, copy.held[i].text, copy.held[i].len))
            goto werr;
    for (size_t i = 0; i < nsyms; i++) {
        size_t n = msnap_fmt_symbol(buf, sizeof buf, &syms[i]);
        if (!n) { /* a name longer than 8 KiB: write it without the name */
            msnap_symbol short_sym = syms[i];
            short_sym.function = "";
            short_sym.file = "";
            n = msnap_fmt_symbol(buf, sizeof buf, &short_sym);
        }
        if (msnap_out_write(copy.out, buf, n))
            goto werr;
    }
    int cl = msnap_out_close(copy.out);
    copy.out = NULL;
    if (cl)
        goto werr;
    if (tmp[0]) {
        if (outfile_commit(tmp, target) != 0) {
            snprintf(err, sizeof err, "%s: cannot write: %s", target, strerror(errno));
            tmp[0] = 0;
            goto done;
        }
        tmp[0] = 0;
    }
    fprintf(stderr, "memsnap symbolize: %zu IPs resolved (%zu with a function "
            "name), %zu of %zu modules usable%s%s -> %s\n", nsyms, named, mc.ok,
            mc.tried, note, named ? "" : "; the recording's own symbols kept",
            to_stdout ? "stdout" : out_path ? out_path : in_path);
    ret = 0;
    goto done;
werr:
    snprintf(err, sizeof err, "%s: write error: %s", target, strerror(errno));
done:
    if (ret && err[0])
        fprintf(stderr, "%s\n", err);
    if (copy.out)
        msnap_out_close(copy.out);
    if (copy.fd >= 0)
        close(copy.fd);
    outfile_discard(tmp);
    for (size_t i = 0; i < copy.nheld; i++)
        free(copy.held[i].text);
    free(copy.held);
    u64map_free(&resolved);
    free(todo);
    free(syms);
    msnap_symbolizer_free(sy);
    search_free(&search);
    an_free(&f);
    free(real);
    return ret;
}
