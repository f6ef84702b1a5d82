/* Checks the numbers of `memsnap summary --json` on the hand-written
 * snapshots in tests/cli/data/ (see the comments in each file's test below
 * for where the expected numbers come from).  Runs the real binary: argv[1]
 * is the memsnap executable, argv[2] the data directory. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../check.h"

static const char *memsnap, *data;

/* Runs "memsnap summary DATA/file args", returns its stdout (malloc'd) and
 * exit status in *rc. */
static char *run(const char *file, const char *args, int *rc)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' summary '%s/%s' %s", memsnap, data, file,
             args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (buf)
        buf[n] = '\0';
    return buf;
}

/* The number at a path of object keys / array indexes ("devices.0.reserved
 * .peak"); -1 when absent. */
static double num(const cJSON *o, const char *path)
{
    char *copy = strdup(path), *save = NULL;
    const cJSON *cur = o;
    for (char *tok = strtok_r(copy, ".", &save); tok && cur;
         tok = strtok_r(NULL, ".", &save))
        cur = (tok[0] >= '0' && tok[0] <= '9')
                  ? cJSON_GetArrayItem(cur, atoi(tok))
                  : cJSON_GetObjectItemCaseSensitive(cur, tok);
    free(copy);
    return cJSON_IsNumber(cur) ? cur->valuedouble : -1;
}

/* The string at a path (same syntax), "" when absent. */
static const char *str(const cJSON *o, const char *path)
{
    char *copy = strdup(path), *save = NULL;
    const cJSON *cur = o;
    for (char *tok = strtok_r(copy, ".", &save); tok && cur;
         tok = strtok_r(NULL, ".", &save))
        cur = (tok[0] >= '0' && tok[0] <= '9')
                  ? cJSON_GetArrayItem(cur, atoi(tok))
                  : cJSON_GetObjectItemCaseSensitive(cur, tok);
    free(copy);
    return cJSON_IsString(cur) ? cur->valuestring : "";
}

/* Runs summary --json on file and parses it; NULL on failure. */
static cJSON *summary_json(const char *file, const char *args, int want_rc)
{
    int rc;
    char full[256];
    snprintf(full, sizeof full, "--json %s", args);
    char *out = run(file, full, &rc);
    CHECK(out != NULL);
    CHECK_EQ_U64(rc, want_rc);
    cJSON *o = out ? cJSON_Parse(out) : NULL;
    CHECK(o != NULL);
    free(out);
    return o;
}

/* basic.msnap: device 0 reserved = 2 MiB + 1 MiB (t=2000, 3 MiB), free of
 * the 2 MiB without a size (t=3000, 1 MiB), cuMemCreate 4 MiB (t=4000,
 * 5 MiB), async 64 KiB (t=5000, 5 MiB + 64 KiB = the peak: stream-ordered
 * memory is reserved, docs/format.md "Layers"), managed 1000 B, cuMemRelease
 * (t=7100, 1 MiB + 1000 B final).  Device 1: 512 B. */
static void test_basic(void)
{
    cJSON *o = summary_json("basic.msnap", "--marks --top 5", 0);
    if (!o)
        return;
    CHECK_EQ_U64(num(o, "devices.0.device"), 0);
    CHECK_EQ_U64(num(o, "devices.0.reserved.peak"), 5242880 + 65536);
    CHECK_EQ_U64(num(o, "devices.0.reserved.peak_t_ns"), 5000);
    CHECK_EQ_U64(num(o, "devices.0.reserved.final"), 1048576 + 1000);
    CHECK_EQ_U64(num(o, "devices.0.async.peak"), 65536);
    CHECK_EQ_U64(num(o, "devices.0.async.final"), 0);
    CHECK_EQ_U64(num(o, "devices.0.managed.peak"), 1000);
    CHECK_EQ_U64(num(o, "devices.0.vmm_va.peak"), 8388608);
    CHECK_EQ_U64(num(o, "devices.0.vmm_va.final"), 0);
    CHECK_EQ_U64(num(o, "devices.0.vmm_mapped.peak"), 4194304);
    CHECK_EQ_U64(num(o, "devices.0.live_at_end.count"), 2);
    CHECK_EQ_U64(num(o, "devices.0.live_at_end.bytes"), 1048576 + 1000);
    CHECK_EQ_U64(num(o, "devices.1.device"), 1);
    CHECK_EQ_U64(num(o, "devices.1.reserved.peak"), 512);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(o, "devices"), 0),
        "allocated")));
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o, "allocated_seen")));
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "top_sites"),
                                           "allocated")));
    CHECK_EQ_U64(num(o, "pinned_host.peak"), 4096);
    CHECK_EQ_U64(num(o, "pinned_host.live_bytes"), 4096);
    CHECK_EQ_U64(num(o, "oom_count"), 0);
    CHECK_EQ_U64(num(o, "failed_free_count"), 1);
    CHECK_EQ_U64(num(o, "failed_frees.0.addr"), 123456);
    CHECK_EQ_U64(num(o, "live_at_end.count"), 3);
    CHECK_EQ_U64(num(o, "live_at_end.bytes"), 1048576 + 1000 + 512);
    CHECK_EQ_U64(num(o, "events.total"), 17);
    CHECK_EQ_U64(num(o, "events.by_action.alloc"), 3);
    CHECK_EQ_U64(num(o, "events.by_api.cuMemFree_v2"), 2);
    CHECK_EQ_U64(num(o, "header.pid"), 4242);
    CHECK(strcmp(str(o, "header.command"), "python train.py --bs 8") == 0);
    CHECK(strcmp(str(o, "header.mode"), "stream") == 0);
    /* t0 is above 2^53, beyond what a double (cJSON) holds: the text must
     * carry it exactly. */
    int rc;
    char *text = run("basic.msnap", "--json", &rc);
    CHECK(text && strstr(text, "\"t0_unix_ns\":1700000000000000000,"));
    free(text);
    /* Sites: stack 3 (4 MiB vmm_create + 64 KiB async), stack 1, stack 2. */
    CHECK_EQ_U64(num(o, "top_sites.reserved.0.stack"), 3);
    CHECK_EQ_U64(num(o, "top_sites.reserved.0.peak"), 4194304 + 65536);
    CHECK_EQ_U64(num(o, "top_sites.reserved.1.stack"), 1);
    CHECK_EQ_U64(num(o, "top_sites.reserved.1.peak"), 2097152);
    CHECK(strcmp(str(o, "top_sites.reserved.1.frames.0"),
                 "alloc_weights (model.c:42)") == 0);   /* sym record */
    CHECK(strcmp(str(o, "top_sites.reserved.1.frames.2"), "app+0x1200") == 0); /* module */
    CHECK(strcmp(str(o, "top_sites.reserved.2.frames.0"),
                 "libtorch_cuda.so+0x1234") == 0);
    CHECK(strcmp(str(o, "top_sites.reserved.0.frames.0"), "0x7fff00001000") == 0); /* raw */
    /* A site is a stack on one device (state.h): stack 2's allocations on
     * devices 0 and 1 are two sites. */
    CHECK_EQ_U64(num(o, "top_sites.reserved.2.count"), 1);
    CHECK_EQ_U64(num(o, "top_sites.reserved.2.live_at_end"), 1048576);
    CHECK_EQ_U64(num(o, "top_sites.reserved.4.stack"), 2);
    CHECK_EQ_U64(num(o, "top_sites.reserved.4.device"), 1);
    CHECK_EQ_U64(num(o, "top_sites.pinned.0.peak"), 4096);
    /* Marks: reserved at each nvtx_mark. */
    CHECK_EQ_U64(num(o, "nvtx_marks"), 2);
    CHECK(strcmp(str(o, "marks.0.message"), "after two allocs") == 0);
    CHECK_EQ_U64(num(o, "marks.0.devices.0.reserved"), 3145728);
    CHECK_EQ_U64(num(o, "marks.0.devices.1.reserved"), 512);
    CHECK_EQ_U64(num(o, "marks.1.devices.0.reserved"), 1048576 + 1000);
    CHECK(strcmp(str(o, "marks.1.message"), "end") == 0);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(o, "truncated")));
    cJSON_Delete(o);
}

/* oom.msnap: 1 GiB + 512 MiB live (peak 1.5 GiB at 2 ms), an OOM asking for
 * 2 GiB with 1 MiB free: exit status 1. */
static void test_oom(void)
{
    cJSON *o = summary_json("oom.msnap", "", 1);
    if (!o)
        return;
    CHECK_EQ_U64(num(o, "oom_count"), 1);
    CHECK_EQ_U64(num(o, "ooms.0.requested"), 2147483648ULL);
    CHECK_EQ_U64(num(o, "ooms.0.device_free"), 1048576);
    CHECK_EQ_U64(num(o, "ooms.0.device_total"), 150000000000ULL);
    CHECK_EQ_U64(num(o, "ooms.0.t_ns"), 3500000000ULL);
    CHECK_EQ_U64(num(o, "ooms.0.result"), 2);
    CHECK(strcmp(str(o, "ooms.0.api"), "cuMemAlloc_v2") == 0);
    CHECK(strcmp(str(o, "ooms.0.frames.0"), "0x401000") == 0);
    CHECK_EQ_U64(num(o, "devices.0.reserved.peak"), 1610612736ULL);
    CHECK_EQ_U64(num(o, "devices.0.reserved.final"), 1073741824ULL);
    cJSON_Delete(o);
}

/* blocks.msnap: a 20 MiB segment; blocks 1 MiB + 3 MiB (peak 4 MiB at
 * t=300), free 1 MiB, then 512 KiB: allocated final 3.5 MiB. */
static void test_blocks(void)
{
    cJSON *o = summary_json("blocks.msnap", "--marks", 0);
    if (!o)
        return;
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "allocated_seen")));
    CHECK_EQ_U64(num(o, "devices.0.reserved.peak"), 20971520);
    CHECK_EQ_U64(num(o, "devices.0.allocated.peak"), 4194304);
    CHECK_EQ_U64(num(o, "devices.0.allocated.peak_t_ns"), 300);
    CHECK_EQ_U64(num(o, "devices.0.allocated.final"), 3670016);
    CHECK_EQ_U64(num(o, "marks.0.devices.0.allocated"), 4194304);
    CHECK_EQ_U64(num(o, "marks.0.devices.0.reserved"), 20971520);
    CHECK(strcmp(str(o, "marks.0.message"), "checkpoint") == 0);
    cJSON_Delete(o);
}

/* truncated.msnap: the third line is cut off mid-way. */
static void test_truncated(void)
{
    cJSON *o = summary_json("truncated.msnap", "", 0);
    if (o) {
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(o, "truncated")));
        CHECK_EQ_U64(num(o, "lines"), 2);
        CHECK_EQ_U64(num(o, "devices.0.reserved.peak"), 4096);
        cJSON_Delete(o);
    }
    int rc;
    char *text = run("truncated.msnap", "", &rc);
    CHECK_EQ_U64(rc, 0);
    CHECK(text && strstr(text, "(file truncated after line 2: the process "
                               "probably died; shown up to there)"));
    free(text);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MEMSNAP DATA_DIR\n", argv[0]);
        return 2;
    }
    memsnap = argv[1];
    data = argv[2];
    test_basic();
    test_oom();
    test_blocks();
    test_truncated();
    return check_summary();
}
