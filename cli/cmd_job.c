/* memsnap job: the job view of many snapshots, one per rank (a training
 * job's `-o run-%q{RANK}.msnap`): which rank ran out or came closest, and
 * why; which sites differ between ranks.
 *
 * This file parses the arguments, reads the files on several threads
 * (parallel.h) into rank records and reduces them (analyze/job.h, the
 * same map and reduce the Python API runs on Dask workers), then prints
 * the job object as JSON or as text.  The text is one screen of findings
 * whatever the number of ranks (the rest is in --json), then the rank
 * table, one line per rank.  `memsnap summary` of several files prints the
 * same (job_run).
 *
 * Exit status: 0 ok, 1 a rank's snapshot has an OOM event, 2 usage error or
 * unreadable input (one line on stderr).
 */
#define _GNU_SOURCE   /* strverscmp */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "util/human.h"
#include "analyze/job.h"
#include "analyze/model.h"
#include "options.h"
#include "parallel.h"
#include "analyze/result_json.h"

#define SHOWN_SITES 5        /* divergent sites in the text */
#define SHOWN_FAILURES 3     /* OOM paragraphs in the text */
#define SHOWN_WINDOWS 3      /* ring dumps / cut-off files named */
#define SHOWN_STEPS 4        /* step groups named */
#define WRAP 100             /* paragraph width */

static const char usage_text[] =
    "usage: memsnap job FILE...|DIR... [--json] [-j N]\n"
    "\n"
    "The job view of many snapshots, one per rank (memsnap run -o\n"
    "'run-%q{RANK}.msnap'; a DIR stands for its .msnap and .msnap.zst files).\n"
    "Each file is read once, on up to N threads, and what the files say\n"
    "together is printed: one screen whatever the number of ranks, then a\n"
    "table with a line per rank.\n"
    "\n"
    "  ranks       per rank: its file, rank (the header's, the launcher's RANK;\n"
    "              else the part of the file names that differs, run-0 ..\n"
    "              run-1023, else \"rank N\" in the name),\n"
    "              host, device, peak reserved and allocated, OOMs and its top\n"
    "              allocation site\n"
    "  imbalance   the rank with the highest peak against the median rank,\n"
    "              by how much, and the sites that make the difference\n"
    "  divergent   the sites whose peak differs most across ranks (--json:\n"
    "    sites     a site x rank table of peaks)\n"
    "  failures    each rank that ran out of memory, the first to fail\n"
    "              first: its OOM story in one paragraph\n"
    "  alignment   in which NVTX step (range, else mark) each rank peaked,\n"
    "              and where a ring dump's window starts, so that windows\n"
    "              are compared for what they are\n"
    "\n"
    "  --json       one JSON object with all of it (exact byte counts; the\n"
    "               dict memsnap.job(...).summary() returns)\n"
    "  -j, --jobs N files read at once (default: the number of cores); the\n"
    "               output is the same for every N\n"
    "  -h, --help   this help\n"
    "\n"
    "Exit status: 0 ok, 1 a snapshot has an OOM event, 2 bad usage or\n"
    "unreadable input.\n";

/* ---- the files ------------------------------------------------------------ */

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n > k && !strcmp(s + n - k, suf);
}

static int cmp_name(const void *a, const void *b)
{
    return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The files named: each FILE as given, each DIR's .msnap and .msnap.zst
 * files in natural order (run-2 before run-10).  0 with *out (free each
 * and the array), else 2 after a message. */
static int expand_paths(const char *sub, char **args, int nargs, char ***out, int *nout)
{
    char **v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < nargs; i++) {
        struct stat st;
        int dir = strcmp(args[i], "-") && stat(args[i], &st) == 0 && S_ISDIR(st.st_mode);
        char **names = NULL;
        size_t nn = 0, capn = 0;
        if (dir) {
            DIR *d = opendir(args[i]);
            if (!d) {
                fprintf(stderr, "%s: cannot read the folder\n", args[i]);
                goto fail;
            }
            struct dirent *e;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.' ||
                    !(has_suffix(e->d_name, ".msnap") || has_suffix(e->d_name, ".msnap.zst")))
                    continue;
                if (nn == capn) {
                    capn = capn ? capn * 2 : 64;
                    char **x = realloc(names, capn * sizeof *x);
                    if (!x) {
                        closedir(d);
                        goto oom;
                    }
                    names = x;
                }
                /* "." gives bare names, as a shell's * would */
                int here = !strcmp(args[i], ".") || !strcmp(args[i], "./");
                size_t len = strlen(args[i]) + strlen(e->d_name) + 2;
                if (!(names[nn] = malloc(len))) {
                    closedir(d);
                    goto oom;
                }
                snprintf(names[nn++], len, "%s%s%s", here ? "" : args[i],
                         here || has_suffix(args[i], "/") ? "" : "/", e->d_name);
            }
            closedir(d);
            if (nn)
                qsort(names, nn, sizeof *names, cmp_name);
            if (!nn) {
                fprintf(stderr, "memsnap %s: %s has no .msnap or .msnap.zst file\n", sub,
                        args[i]);
                free(names);
                goto fail;
            }
        } else {
            if (!(names = malloc(sizeof *names)) || !(names[0] = strdup(args[i]))) {
                free(names);
                goto oom;
            }
            nn = 1;
        }
        if (n + nn > cap) {
            while (n + nn > cap)
                cap = cap ? cap * 2 : 64;
            char **x = realloc(v, cap * sizeof *x);
            if (!x) {
                for (size_t k = 0; k < nn; k++)
                    free(names[k]);
                free(names);
                goto oom;
            }
            v = x;
        }
        memcpy(v + n, names, nn * sizeof *names);
        n += nn;
        free(names);
        continue;
    oom:
        fprintf(stderr, "memsnap %s: out of memory\n", sub);
    fail:
        for (size_t k = 0; k < n; k++)
            free(v[k]);
        free(v);
        return 2;
    }
    int nstdin = 0;
    for (size_t k = 0; k < n; k++)
        nstdin += !strcmp(v[k], "-");
    if (nstdin > 1) {
        for (size_t k = 0; k < n; k++)
            free(v[k]);
        free(v);
        return cli_usage_error(sub, "standard input (\"-\") can be read only once");
    }
    *out = v;
    *nout = (int)n;
    return 0;
}

/* ---- reading: a record per file, on threads ------------------------------- */

typedef struct job_ctx {
    char **paths;
    cJSON **recs;
    char (*errs)[1280];
    int rc;                    /* 0, or 1 once a file had an OOM */
} job_ctx;

static int read_one(void *c, int i)
{
    job_ctx *j = c;
    return job_read_file(j->paths[i], NULL, &j->recs[i], j->errs[i], sizeof j->errs[i]);
}

static int take_one(void *c, int i, int rc)
{
    job_ctx *j = c;
    if (rc == 2) {
        fprintf(stderr, "%s\n", j->errs[i]);
        return 2;
    }
    if (rc > j->rc)
        j->rc = rc;
    return 0;
}

/* ---- text ----------------------------------------------------------------- */

static const char *sz(uint64_t v, char *buf)
{
    return msnap_size_text(v, buf, 32);
}

/* "rank N" for a rank member, or the file's base name when it has none. */
static const char *who(const cJSON *o, char *buf, size_t cap)
{
    const cJSON *r = jo(o, "rank");
    if (cJSON_IsNumber(r)) {
        snprintf(buf, cap, "rank %.0f", r->valuedouble);
    } else {
        const char *f = js(o, "file"), *b = strrchr(f, '/');
        snprintf(buf, cap, "%s", b ? b + 1 : f);
    }
    return buf;
}

/* A list of ranks as "0-3, 5, 9" (sorted input), cut with ", ..." at cap. */
static void rank_list(const double *v, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        int k = i;
        while (k + 1 < n && v[k + 1] == v[k] + 1)
            k++;
        char item[64];
        if (k > i)
            snprintf(item, sizeof item, "%s%.0f-%.0f", i ? ", " : "", v[i], v[k]);
        else
            snprintf(item, sizeof item, "%s%.0f", i ? ", " : "", v[i]);
        if (len + strlen(item) + 6 >= cap) {
            snprintf(buf + len, cap - len, ", ...");
            return;
        }
        len += (size_t)snprintf(buf + len, cap - len, "%s", item);
        i = k;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prints lead, then text as one paragraph wrapped at WRAP columns; the
 * lines after the first are indented by indent columns more than the
 * lead's last line, or by -indent columns when indent is negative. */
static void paragraph(const char *lead, const char *text, int indent)
{
    int col = printf("%s", lead), first = 1;
    const char *nl = strrchr(lead, '\n');
    int lead_w = (int)strlen(nl ? nl + 1 : lead);
    if (nl)
        col = lead_w;
    const char *s = text;
    while (*s) {
        while (*s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ' ')
            e++;
        int w = (int)(e - s);
        if (!w)
            break;
        if (!first && col + 1 + w > WRAP) {
            int pad = indent >= 0 ? lead_w + indent : -indent;
            printf("\n%*s", pad, "");
            col = pad;
            first = 1;
        }
        col += printf("%s%.*s", first ? "" : " ", w, s);
        first = 0;
        s = e;
    }
    printf("\n");
}

/* A step member as " in step 41" / " after mark X" / "". */
static void step_text(const cJSON *st, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!st || cJSON_IsNull(st))
        return;
    const char *t = js(st, "text");
    if (!strncmp(t, "after ", 6))
        snprintf(buf, cap, " (after NVTX mark \"%s\")", t + 6);
    else
        snprintf(buf, cap, " (in NVTX range \"%s\")", t);
}

static void print_head(const cJSON *job)
{
    char a[32], b[32], c[32], w1[96], w2[96], w3[96];
    const cJSON *ranks = jo(job, "ranks"), *x;
    int n = cJSON_GetArraySize(ranks);
    double *rv = malloc(((size_t)n + 1) * sizeof *rv);
    int nr = 0;
    cJSON_ArrayForEach(x, ranks)
        if (cJSON_IsNumber(jo(x, "rank")) && rv)
            rv[nr++] = jo(x, "rank")->valuedouble;
    char list[96] = "";
    if (rv) {
        qsort(rv, (size_t)nr, sizeof *rv, cmp_double);
        rank_list(rv, nr, list, sizeof list);
    }
    const char *from = js(job, "ranks_from");
    printf("job: %d file%s", n, n == 1 ? "" : "s");
    if (nr)
        printf(", rank%s %s (from the %s)", nr == 1 ? "" : "s", list,
               !strcmp(from, "header") ? "headers" : !strcmp(from, "name") ? "file names"
                                                   : "headers and file names");
    if (nr < n)
        printf(", %d without a rank", n - nr);
    int hosts = (int)cJSON_GetNumberValue(jo(job, "hosts"));
    printf(", %d host%s\n", hosts, hosts == 1 ? "" : "s");
    /* devices by name */
    const char *names[3] = {0};
    int counts[3] = {0}, other = 0;
    cJSON_ArrayForEach(x, ranks) {
        const char *nm = *js(x, "device_name") ? js(x, "device_name") : "device unknown";
        int k = 0;
        while (k < 3 && names[k] && strcmp(names[k], nm))
            k++;
        if (k == 3) {
            other++;
        } else {
            names[k] = nm;
            counts[k]++;
        }
    }
    printf("devices:");
    for (int k = 0; k < 3 && names[k]; k++)
        printf("%s %s x %d", k ? "," : "", names[k], counts[k]);
    if (other)
        printf(", %d other", other);
    printf("\n");
    const cJSON *pr = jo(job, "peak_reserved");
    if (n)
        printf("peak reserved: median %s (%s), highest %s (%s), lowest %s (%s)\n",
               sz(ju(jo(pr, "median"), "peak"), a), who(jo(pr, "median"), w1, sizeof w1),
               sz(ju(jo(pr, "max"), "peak"), b), who(jo(pr, "max"), w2, sizeof w2),
               sz(ju(jo(pr, "min"), "peak"), c), who(jo(pr, "min"), w3, sizeof w3));
    int failed = (int)cJSON_GetNumberValue(jo(job, "failed"));
    if (!failed) {
        printf("OOMs: none\n");
    } else {
        double *fv = malloc(((size_t)failed + 1) * sizeof *fv);
        int nf = 0, unnamed = 0;
        cJSON_ArrayForEach(x, jo(job, "failures")) {
            if (cJSON_IsNumber(jo(x, "rank")) && fv)
                fv[nf++] = jo(x, "rank")->valuedouble;
            else
                unnamed++;
        }
        char fl[96] = "";
        if (fv) {
            qsort(fv, (size_t)nf, sizeof *fv, cmp_double);
            rank_list(fv, nf, fl, sizeof fl);
        }
        printf("OOMs: %d of %d rank%s ran out", failed, n, n == 1 ? "" : "s");
        if (nf)
            printf(" (rank%s %s%s)", nf == 1 ? "" : "s", fl, unnamed ? " and files without a rank" : "");
        printf("\n");
        free(fv);
    }
    free(rv);
}

static void print_imbalance(const cJSON *im)
{
    char a[32], b[32], c[32], w1[96], w2[96];
    if (!im || cJSON_IsNull(im))
        return;
    const cJSON *hi = jo(im, "highest"), *md = jo(im, "median"), *x;
    uint64_t above = ju(im, "above_median");
    char text[512], lead[160];
    snprintf(lead, sizeof lead, "\nimbalance: ");
    if (!above) {
        snprintf(text, sizeof text, "%s peaked at %s %s, no more than the median rank "
                 "(%s, %s)", who(hi, w1, sizeof w1), sz(ju(hi, "peak"), a), js(im, "layer"),
                 who(md, w2, sizeof w2), sz(ju(md, "peak"), b));
        paragraph(lead, text, -2);
        return;
    }
    char pct[32] = "";
    if (!jnull(im, "above_median_pct"))
        snprintf(pct, sizeof pct, " (%.1f%%)", cJSON_GetNumberValue(jo(im, "above_median_pct")));
    snprintf(text, sizeof text, "%s peaked at %s %s, %s%s above the median rank (%s, "
             "%s)%s", who(hi, w1, sizeof w1), sz(ju(hi, "peak"), a), js(im, "layer"),
             sz(above, b), pct,
             who(md, w2, sizeof w2), sz(ju(md, "peak"), c),
             cJSON_GetArraySize(jo(im, "sites")) ? ", on these sites:" : "");
    paragraph(lead, text, -2);
    cJSON_ArrayForEach(x, jo(im, "sites"))
        printf("  +%-11s %s (peak %s, median %s)\n", sz(ju(x, "difference"), a),
               js(x, "label"), sz(ju(x, "peak"), b), sz(ju(x, "median"), c));
}

/* "rank N" of a site's min_rank / max_rank member, else the file's base
 * name (min_file / max_file). */
static const char *rank_member(const cJSON *o, const char *key, const char *file_key,
                               char *buf, size_t cap)
{
    const cJSON *r = jo(o, key);
    const char *f = js(o, file_key), *b = strrchr(f, '/');
    if (cJSON_IsNumber(r))
        snprintf(buf, cap, "rank %.0f", r->valuedouble);
    else
        snprintf(buf, cap, "%s", b ? b + 1 : f);
    return buf;
}

static void print_divergent(const cJSON *dv)
{
    char a[32], b[32], c[32], r1[96], r2[96];
    const cJSON *sites = jo(dv, "sites"), *x;
    int n = cJSON_GetArraySize(sites), i = 0;
    if (!n)
        return;
    printf("\nsites whose peak differs most across ranks (a site x rank table: --json)\n");
    cJSON_ArrayForEach(x, sites) {
        if (i++ == SHOWN_SITES)
            break;
        printf("  %s\n      min %s (%s), median %s, max %s (%s)\n", js(x, "label"),
               sz(ju(x, "min"), a), rank_member(x, "min_rank", "min_file", r1, sizeof r1),
               sz(ju(x, "median"), b), sz(ju(x, "max"), c),
               rank_member(x, "max_rank", "max_file", r2, sizeof r2));
    }
    if (n > SHOWN_SITES)
        printf("  and %d more site%s\n", n - SHOWN_SITES, n - SHOWN_SITES == 1 ? "" : "s");
}

static void print_failures(const cJSON *fa)
{
    char a[32], b[32], c[32], d[32], e[32], t[32], w[96], st[200];
    int n = cJSON_GetArraySize(fa), i = 0;
    if (!n)
        return;
    printf("\nfailures (the first to fail first, by the hosts' clocks)\n");
    uint64_t first = ju(jo(cJSON_GetArrayItem(fa, 0), "oom"), "wall_ns");
    const cJSON *x;
    cJSON_ArrayForEach(x, fa) {
        if (i++ == SHOWN_FAILURES)
            break;
        const cJSON *o = jo(x, "oom");
        char text[2048], lead[160];
        size_t len = 0;
        step_text(jo(o, "step"), st, sizeof st);
        snprintf(lead, sizeof lead, "  %s: ", who(x, w, sizeof w));
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "out of memory at %s%s on device %.0f (host %s)",
                                msnap_time_text(ju(o, "t_ns"), t, sizeof t), st,
                                cJSON_GetNumberValue(jo(o, "device")), js(x, "host"));
        if (i > 1 && ju(o, "wall_ns") >= first)
            len += (size_t)snprintf(text + len, sizeof text - len, ", %s after the first",
                                    msnap_time_text(ju(o, "wall_ns") - first, t, sizeof t));
        len += (size_t)snprintf(text + len, sizeof text - len, ": %s requested through %s",
                                sz(ju(o, "requested"), a), js(o, "api"));
        if (!jnull(o, "site"))
            len += (size_t)snprintf(text + len, sizeof text - len, " at %s", js(o, "site"));
        if (!jnull(o, "reserved")) {
            len += (size_t)snprintf(text + len, sizeof text - len, ", with %s reserved",
                                    sz(ju(o, "reserved"), b));
            if (!jnull(o, "allocated"))
                len += (size_t)snprintf(text + len, sizeof text - len,
                                        " (%s allocated, %s free inside it, largest free "
                                        "block %s)", sz(ju(o, "allocated"), c),
                                        sz(ju(o, "free_inside_reserved"), d),
                                        sz(ju(o, "largest_free_block"), e));
        }
        if (ju(o, "device_total"))
            len += (size_t)snprintf(text + len, sizeof text - len, "; the device had %s free of %s",
                                    sz(ju(o, "device_free"), a), sz(ju(o, "device_total"), b));
        if (!jnull(o, "verdict"))
            len += (size_t)snprintf(text + len, sizeof text - len, ": %s", js(o, "verdict"));
        if (ju(x, "ooms") > 1)
            snprintf(text + len, sizeof text - len, " (%" PRIu64 " OOMs in the file, this the first)",
                     ju(x, "ooms"));
        paragraph(lead, text, -6);
    }
    if (n > SHOWN_FAILURES)
        printf("  and %d more rank%s ran out (--json: failures)\n", n - SHOWN_FAILURES,
               n - SHOWN_FAILURES == 1 ? "" : "s");
}

/* A step group's step as text ("step 41", "\"forward\""). */
static void group_step(const cJSON *g, const char *word, char *buf, size_t cap)
{
    const cJSON *s = jo(g, "step");
    if (cJSON_IsNumber(s))
        snprintf(buf, cap, "%s %.0f", word ? word : "", s->valuedouble);
    else if (cJSON_IsString(s))
        snprintf(buf, cap, "\"%s\"", s->valuestring);
    else
        snprintf(buf, cap, "no step");
}

static void print_alignment(const cJSON *al, int nranks)
{
    char s[160], list[96];
    const char *by = js(al, "by");
    const cJSON *word = jo(al, "word"), *g;
    const char *wd = cJSON_IsString(word) ? word->valuestring : NULL;
    if (!strcmp(by, "none")) {
        printf("\nalignment: no NVTX ranges or marks in these files: ranks are compared over "
               "their whole recordings\n");
        return;
    }
    const char *what = !strcmp(by, "steps") ? "NVTX ranges" : "NVTX marks";
    const cJSON *groups = jo(al, "peak_steps");
    if (cJSON_IsTrue(jo(al, "same_step"))) {
        group_step(cJSON_GetArrayItem(groups, 0), wd, s, sizeof s);
        printf("\nalignment (by %s): %s peaked in %s\n", what,
               nranks == 1 ? "the rank" : "every rank", s);
        return;
    }
    printf("\nalignment (by %s): the ranks peaked in different steps\n", what);
    int i = 0, ng = cJSON_GetArraySize(groups);
    cJSON_ArrayForEach(g, groups) {
        if (i++ == SHOWN_STEPS)
            break;
        double v[16];
        int k = 0, cnt = (int)cJSON_GetNumberValue(jo(g, "ranks"));
        const cJSON *r;
        cJSON_ArrayForEach(r, jo(g, "first_ranks"))
            if (cJSON_IsNumber(r) && k < 16)
                v[k++] = r->valuedouble;
        qsort(v, (size_t)k, sizeof *v, cmp_double);
        rank_list(v, k, list, sizeof list);
        group_step(g, wd, s, sizeof s);
        printf("  %-24s %d rank%s%s%s%s%s\n", s, cnt, cnt == 1 ? "" : "s", k ? " (" : "",
               k ? list : "", k && cnt > k ? ", ..." : "", k ? ")" : "");
    }
    if (ng > SHOWN_STEPS)
        printf("  and %d more steps (--json: alignment)\n", ng - SHOWN_STEPS);
}

static void print_windows(const cJSON *wo)
{
    char t[32], w[96], st[200];
    int ring = (int)cJSON_GetNumberValue(jo(wo, "ring"));
    int cut = (int)cJSON_GetNumberValue(jo(wo, "truncated"));
    if (!ring && !cut)
        return;
    char text[512];
    size_t len = 0;
    text[0] = '\0';
    if (ring)
        len += (size_t)snprintf(text, sizeof text, "%d ring dump%s: the last events only, so "
                                "their sites and steps are their windows' (a site missing "
                                "there is unknown, not 0) and their peaks also the counters "
                                "samples'", ring, ring == 1 ? "" : "s");
    if (cut)
        snprintf(text + len, sizeof text - len, "%s%d file%s cut off (the process probably "
                 "died)", ring ? "; " : "", cut, cut == 1 ? "" : "s");
    paragraph("\nwindows: ", text, -2);
    int i = 0, n = cJSON_GetArraySize(jo(wo, "files"));
    const cJSON *x;
    cJSON_ArrayForEach(x, jo(wo, "files")) {
        if (i++ == SHOWN_WINDOWS)
            break;
        step_text(jo(x, "step"), st, sizeof st);
        if (!strcmp(js(x, "mode"), "ring")) {
            printf("  %s: its window starts at %s%s", who(x, w, sizeof w),
                   jnull(x, "first_event_t_ns") ? "?" :
                   msnap_time_text(ju(x, "first_event_t_ns"), t, sizeof t), st);
            if (ju(x, "dropped"))
                printf(", %" PRIu64 " earlier events left out", ju(x, "dropped"));
        } else {
            printf("  %s: ends at %s", who(x, w, sizeof w),
                   msnap_time_text(ju(x, "last_t_ns"), t, sizeof t));
        }
        printf("%s\n", cJSON_IsTrue(jo(x, "truncated")) && !strcmp(js(x, "mode"), "ring")
                           ? " (cut off)" : "");
    }
    if (n > SHOWN_WINDOWS)
        printf("  and %d more (--json: windows)\n", n - SHOWN_WINDOWS);
}

static void print_table(const cJSON *ranks)
{
    char a[32], b[32], r[32], d[32];
    int wf = 4, wh = 4;
    const cJSON *x;
    cJSON_ArrayForEach(x, ranks) {
        int l = (int)strlen(js(x, "file")), h = (int)strlen(js(x, "host"));
        wf = l > wf ? l : wf;
        wh = h > wh ? h : wh;
    }
    printf("\n  %-5s %-*s  %-*s  %-6s %-14s %-14s %-5s %s\n", "rank", wf, "file", wh, "host",
           "device", "peak reserved", "peak allocated", "OOMs", "top site");
    cJSON_ArrayForEach(x, ranks) {
        const cJSON *rk = jo(x, "rank");
        if (cJSON_IsNumber(rk))
            snprintf(r, sizeof r, "%.0f", rk->valuedouble);
        else
            snprintf(r, sizeof r, "-");
        double dv = cJSON_GetNumberValue(jo(x, "device"));
        if (dv >= 0)
            snprintf(d, sizeof d, "%.0f", dv);
        else
            snprintf(d, sizeof d, "-");
        printf("  %-5s %-*s  %-*s  %-6s %-14s %-14s %-5" PRIu64 " %s\n", r, wf, js(x, "file"),
               wh, js(x, "host"), d, sz(ju(x, "peak_reserved"), a),
               jnull(x, "peak_allocated") ? "n/a" : sz(ju(x, "peak_allocated"), b),
               ju(x, "ooms"), jnull(x, "top_site") ? "-" : js(x, "top_site"));
    }
}

static void print_job_text(const cJSON *job)
{
    print_head(job);
    print_imbalance(jo(job, "imbalance"));
    print_divergent(jo(job, "divergent_sites"));
    print_failures(jo(job, "failures"));
    print_alignment(jo(job, "alignment"), cJSON_GetArraySize(jo(job, "ranks")));
    print_windows(jo(job, "windows"));
    print_table(jo(job, "ranks"));
}

/* ---- the command ---------------------------------------------------------- */

int job_run(const char *sub, char **paths, int n, int json, int jobs)
{
    job_ctx j = {.paths = paths};
    j.recs = calloc((size_t)n, sizeof *j.recs);
    j.errs = malloc((size_t)n * sizeof *j.errs);
    int rc = 0;
    if (!j.recs || !j.errs) {
        fprintf(stderr, "memsnap %s: out of memory\n", sub);
        rc = 2;
    } else if ((rc = par_run(n, jobs, read_one, take_one, &j, paths)) == 0) {
        cJSON *job = job_reduce(j.recs, n);
        char *text = job && json ? cJSON_PrintUnformatted(job) : NULL;
        if (!job || (json && !text)) {
            fprintf(stderr, "memsnap %s: out of memory\n", sub);
            rc = 2;
        } else {
            if (json)
                printf("%s\n", text);
            else
                print_job_text(job);
            rc = j.rc;
            if (fflush(stdout) != 0) {
                fprintf(stderr, "memsnap %s: cannot write the output\n", sub);
                rc = 2;
            }
        }
        cJSON_free(text);
        cJSON_Delete(job);
    }
    for (int i = 0; j.recs && i < n; i++)
        cJSON_Delete(j.recs[i]);
    free(j.recs);
    free(j.errs);
    return rc;
}

int cmd_job(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'J'},
        {"jobs", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int json = 0, jobs = par_default_jobs(), c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hj:", opts, NULL)) != -1) {
        switch (c) {
        case 'J': json = 1; break;
        case 'j':
            if (par_parse_jobs("job", optarg, &jobs))
                return 2;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: return cli_option_error("job", argv, "hj:", opts);
        }
    }
    if (argc - optind < 1)
        return cli_usage_error("job", "expected snapshot files or folders, got none");
    char **paths = NULL;
    int n = 0;
    if (expand_paths("job", argv + optind, argc - optind, &paths, &n))
        return 2;
    sm_demangle_allow_loading(1);
    int rc = job_run("job", paths, n, json, jobs);
    for (int i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    return rc;
}
