/* util/: the floor every part stands on.  The one size parser (every
 * spelling the nine parsers it replaced took, and what none of them took),
 * FNV-1a against the published test vectors, array growth, and the
 * output-file policy for a symbolic link (replaced by the commands, refused
 * by the recorder: util/outfile.h says why). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "util/grow.h"
#include "util/hash.h"
#include "util/human.h"
#include "util/outfile.h"
#include "util/size.h"

static void test_size_parse(void)
{
    static const struct { const char *s; uint64_t want; } good[] = {
        {"0", 0}, {"4096", 4096}, {"4096B", 4096}, {"4096b", 4096},
        {"64K", 64ull << 10}, {"64k", 64ull << 10}, {"64KiB", 64ull << 10},
        {"64KB", 64ull << 10}, {"512M", 512ull << 20}, {"80G", 80ull << 30},
        {"8gb", 8ull << 30}, {"80GiB", 80ull << 30}, {"1T", 1ull << 40},
        {"64TI", 64ull << 40}, {"1.5T", 3ull << 39}, {"0.5K", 512}, {"1.0", 1},
        {"1073741824", 1073741824}, {"18446744073709551615", UINT64_MAX},
        {"16777215T", 16777215ull << 40},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t v = 7;
        int rc = msnap_size_parse(good[i].s, &v);
        if (rc || v != good[i].want)
            fprintf(stderr, "size \"%s\": rc %d, %llu\n", good[i].s, rc, (unsigned long long)v);
        CHECK(rc == 0);
        CHECK_EQ_U64(v, good[i].want);
    }
    static const char *const bad[] = {
        "", "-5G", "+5G", " 5G", "5G ", "80X", "80GiBs", "1.5", "1.", ".5G", "G", "0x10",
        "16777216T", "18446744073709551616", "1KK", "1iB", "5 G", "1e3",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        int rc = msnap_size_parse(bad[i], &v);
        if (rc == 0)
            fprintf(stderr, "size \"%s\" taken as %llu\n", bad[i], (unsigned long long)v);
        CHECK(rc == -1);
        CHECK_EQ_U64(v, 7);   /* unchanged */
    }
    CHECK(msnap_size_parse(NULL, &(uint64_t){0}) == -1);
}

static void test_fnv(void)
{
    /* the published FNV-1a vectors (64 and 32 bits) */
    CHECK_EQ_U64(msnap_fnv1a_str(MSNAP_FNV_BASIS, ""), 0xcbf29ce484222325ull);
    CHECK_EQ_U64(msnap_fnv1a_str(MSNAP_FNV_BASIS, "a"), 0xaf63dc4c8601ec8cull);
    CHECK_EQ_U64(msnap_fnv1a_str(MSNAP_FNV_BASIS, "foobar"), 0x85944171f73967e8ull);
    CHECK_EQ_U64(msnap_fnv1a32_str("a"), 0xe40c292cu);
    CHECK_EQ_U64(msnap_fnv1a32_str("foobar"), 0xbf9cf968u);
    /* bytes and strings agree; a hash continues */
    CHECK_EQ_U64(msnap_fnv1a(MSNAP_FNV_BASIS, "foobar", 6),
                 msnap_fnv1a_str(msnap_fnv1a_str(MSNAP_FNV_BASIS, "foo"), "bar"));
}

static void test_grow(void)
{
    int *v = NULL;
    size_t cap = 0;
    for (size_t n = 0; n < 1000; n++) {
        CHECK(msnap_grow((void **)&v, &cap, n, sizeof *v) == 0);
        v[n] = (int)n;
    }
    CHECK(cap >= 1000 && cap == 1024);
    CHECK(v[999] == 999);
    size_t before = cap;
    CHECK(msnap_grow((void **)&v, &cap, SIZE_MAX / 2, sizeof *v) == -1);   /* too large */
    CHECK(cap == before && v[999] == 999);                                   /* unchanged */
    free(v);
}

/* A symbolic link at the path: replaced by the commands, its target left
 * alone; refused by the recorder. */
static void test_outfile_links(const char *dir)
{
    char victim[512], link[512], tmp[600];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(link, sizeof link, "%s/out.msnap", dir);
    unlink(link);
    FILE *f = fopen(victim, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("precious\n", f);
    fclose(f);
    CHECK(symlink(victim, link) == 0);

    errno = 0;
    CHECK(outfile_create(link, OUTFILE_REFUSE_LINK, tmp, sizeof tmp) == -1);
    CHECK(errno == ELOOP);
    CHECK(tmp[0] == 0);

    int fd = outfile_create(link, OUTFILE_REPLACE_LINK, tmp, sizeof tmp);
    CHECK(fd >= 0 && tmp[0]);
    CHECK(write(fd, "new\n", 4) == 4);
    close(fd);
    CHECK(outfile_commit(tmp, link) == 0);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISREG(st.st_mode));   /* the link was replaced */
    char buf[32] = "";
    f = fopen(victim, "r");
    CHECK(f && fgets(buf, sizeof buf, f));
    if (f)
        fclose(f);
    CHECK(strcmp(buf, "precious\n") == 0);                  /* its target left alone */

    /* a device is written in place by both */
    CHECK((fd = outfile_create("/dev/null", OUTFILE_REFUSE_LINK, tmp, sizeof tmp)) >= 0);
    CHECK(tmp[0] == 0);
    close(fd);
    CHECK(outfile_commit(tmp, "/dev/null") == 0);
    unlink(link);
    unlink(victim);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    test_size_parse();
    test_fnv();
    test_grow();
    test_outfile_links(argv[1]);
    char b[32];
    CHECK(strcmp(msnap_size_text(3ull << 29, b, sizeof b), "1.50 GiB") == 0);
    return check_summary();
}
