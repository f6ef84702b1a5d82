/* MEMSNAP_ALLOC_CONF parsing: every key, defaults, whitespace, and errors that
 * name the bad key and value and leave the config unchanged. */
#include "alloctest.h"

static void bad(const char *s, const char *want1, const char *want2)
{
    memsnap_alloc_config c, before;
    memsnap_alloc_config_default(&c);
    before = c;
    char err[512];
    int rc = memsnap_alloc_config_parse(&c, s, err, sizeof err);
    CHECK(rc == MEMSNAP_ALLOC_ERR_INVALID);
    CHECK(memcmp(&c, &before, sizeof c) == 0);
    if (!strstr(err, want1) || !strstr(err, want2))
        fprintf(stderr, "config \"%s\": message \"%s\" lacks \"%s\" or \"%s\"\n", s, err, want1,
                want2);
    CHECK(strstr(err, want1) != NULL);
    CHECK(strstr(err, want2) != NULL);
    CHECK(strchr(err, '\n') == NULL);
    CHECK(strcmp(memsnap_alloc_error(), err) == 0);
}

int main(void)
{
    memsnap_alloc_config c;
    memsnap_alloc_config_default(&c);
    CHECK(c.mode == MEMSNAP_ALLOC_FIXED);
    CHECK(c.max_split_size == UINT64_MAX);
    CHECK(c.roundup_power2_divisions == 0);
    CHECK(c.gc_threshold == 0.0);
    CHECK(c.device_limit == 0);
    CHECK(c.trace == 1);

    char err[512];
    CHECK(memsnap_alloc_config_parse(&c,
                                     "expandable_segments:true,max_split_size_mb:256,"
                                     "roundup_power2_divisions:4,garbage_collection_threshold:0.8,"
                                     "device_limit:80G",
                                     err, sizeof err) == 0);
    CHECK(c.mode == MEMSNAP_ALLOC_EXPANDABLE);
    CHECK_EQ_U64(c.max_split_size, 256ull << 20);
    CHECK(c.roundup_power2_divisions == 4);
    CHECK(c.gc_threshold == 0.8);
    CHECK_EQ_U64(c.device_limit, 80ull << 30);

    memsnap_alloc_config_default(&c);
    CHECK(memsnap_alloc_config_parse(&c, " device_limit : 512MiB , trace:false,,expandable_va:64G ",
                                     err, sizeof err) == 0);
    CHECK_EQ_U64(c.device_limit, 512ull << 20);
    CHECK(c.trace == 0);
    CHECK_EQ_U64(c.expandable_va, 64ull << 30);
    CHECK(memsnap_alloc_config_parse(&c, "max_split_size_mb:5", err, sizeof err) == 0);
    CHECK_EQ_U64(c.max_split_size, 20ull << 20); /* PyTorch's floor */
    CHECK(memsnap_alloc_config_parse(&c, "device_limit:1073741824", err, sizeof err) == 0);
    CHECK_EQ_U64(c.device_limit, 1ull << 30);
    CHECK(memsnap_alloc_config_parse(&c, "", err, sizeof err) == 0);
    CHECK(memsnap_alloc_config_parse(&c, NULL, err, sizeof err) == 0);

    bad("expandable_segments:yes", "expandable_segments", "\"yes\"");
    bad("max_split_size_mb:abc", "max_split_size_mb", "\"abc\"");
    bad("max_split_size_mb:0", "max_split_size_mb", "\"0\"");
    bad("roundup_power2_divisions:3", "roundup_power2_divisions", "power of two");
    bad("roundup_power2_divisions:128", "roundup_power2_divisions", "\"128\"");
    bad("garbage_collection_threshold:1.5", "garbage_collection_threshold", "\"1.5\"");
    bad("garbage_collection_threshold:x", "garbage_collection_threshold", "\"x\"");
    bad("device_limit:12Q", "device_limit", "\"12Q\"");
    bad("device_limit:1K", "device_limit", "at least 2M");
    bad("trace:maybe", "trace", "\"maybe\"");
    bad("expandable_segmnts:true", "unknown key \"expandable_segmnts\"", "\"true\"");
    bad("device_limit:80G,bogus:1", "unknown key \"bogus\"", "known keys");
    bad("expandable_segments", "\"expandable_segments\"", "no value");

    /* From the environment. */
    setenv("MEMSNAP_ALLOC_CONF", "expandable_segments:true", 1);
    CHECK(memsnap_alloc_config_from_env(&c, err, sizeof err) == 0);
    CHECK(c.mode == MEMSNAP_ALLOC_EXPANDABLE);
    setenv("MEMSNAP_ALLOC_CONF", "max_split_size_mb:-3", 1);
    CHECK(memsnap_alloc_config_from_env(&c, err, sizeof err) == MEMSNAP_ALLOC_ERR_INVALID);
    CHECK(strstr(err, "MEMSNAP_ALLOC_CONF: max_split_size_mb:\"-3\"") != NULL);
    printf("example message: %s\n", err);

    /* The torch entry point refuses to allocate with a bad config, with one message. */
    sim_start();
    CHECK(memsnap_torch_alloc(1024, 0, NULL) == NULL);
    CHECK(memsnap_torch_alloc(1024, 0, NULL) == NULL);
    unsetenv("MEMSNAP_ALLOC_CONF");
    return check_summary();
}
