/* config.c: the allocator's settings, from a string in the spirit of
 * PYTORCH_CUDA_ALLOC_CONF:
 *
 *   MEMSNAP_ALLOC_CONF="expandable_segments:true,max_split_size_mb:256,
 *                       roundup_power2_divisions:4,garbage_collection_threshold:0.8,
 *                       device_limit:80G"
 *
 * One table lists every key with its parser, so adding a key is one line.
 * A bad key or value is refused whole (the config is unchanged) with one
 * line naming the key and the value.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/size.h"

MS_EXPORT void memsnap_alloc_config_default(memsnap_alloc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = MEMSNAP_ALLOC_FIXED;
    cfg->max_split_size = UINT64_MAX;
    cfg->roundup_power2_divisions = 0;
    cfg->gc_threshold = 0.0;
    cfg->device_limit = 0;
    cfg->expandable_va = 0;
    cfg->trace = 1;
}

/* Each parser returns NULL on success or a description of what is wrong. */
typedef const char *(*parse_fn)(memsnap_alloc_config *cfg, const char *v);

static const char *ms_parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "1")) {
        *out = 1;
        return NULL;
    }
    if (!strcmp(v, "false") || !strcmp(v, "False") || !strcmp(v, "0")) {
        *out = 0;
        return NULL;
    }
    return "is not true or false";
}

static int ms_parse_u64(const char *v, uint64_t *out)
{
    if (!isdigit((unsigned char)v[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end)
        return -1;
    *out = x;
    return 0;
}

/* Sizes: util/size.h (512, 64K, 64KiB, 80G, 1.5T). */
static int ms_parse_size(const char *v, uint64_t *out)
{
    return msnap_size_parse(v, out);
}

static const char *ms_opt_expandable(memsnap_alloc_config *cfg, const char *v)
{
    int b;
    const char *e = ms_parse_bool(v, &b);
    if (!e)
        cfg->mode = b ? MEMSNAP_ALLOC_EXPANDABLE : MEMSNAP_ALLOC_FIXED;
    return e;
}

static const char *ms_opt_max_split(memsnap_alloc_config *cfg, const char *v)
{
    uint64_t mb;
    if (ms_parse_u64(v, &mb) != 0)
        return "is not a number of MiB";
    if (mb == 0)
        return "must be more than 0 (leave it out for no limit)";
    if (mb > (UINT64_MAX >> 21))
        return "is too large";
    /* PyTorch's floor: a limit under 20 MiB would forbid splitting the 20 MiB
     * segments of mid-size requests. */
    cfg->max_split_size = mb < 20 ? (20ull << 20) : (mb << 20);
    return NULL;
}

static const char *ms_opt_roundup(memsnap_alloc_config *cfg, const char *v)
{
    uint64_t d;
    if (ms_parse_u64(v, &d) != 0)
        return "is not a number";
    if (d != 0 && (d > 64 || (d & (d - 1))))
        return "must be 0 or a power of two up to 64";
    cfg->roundup_power2_divisions = (unsigned)d;
    return NULL;
}

static const char *ms_opt_gc(memsnap_alloc_config *cfg, const char *v)
{
    char *end;
    errno = 0;
    double t = strtod(v, &end);
    if (errno || *end || end == v || isnan(t))
        return "is not a number";
    if (!(t > 0.0 && t < 1.0))
        return "must be between 0 and 1 (exclusive)";
    cfg->gc_threshold = t;
    return NULL;
}

static const char *ms_opt_limit(memsnap_alloc_config *cfg, const char *v)
{
    uint64_t b;
    if (ms_parse_size(v, &b) != 0)
        return "is not a size (e.g. 80G, 512M, 1073741824)";
    if (b != 0 && b < (2ull << 20))
        return "must be at least 2M (or 0 for the device's memory)";
    cfg->device_limit = b;
    return NULL;
}

static const char *ms_opt_va(memsnap_alloc_config *cfg, const char *v)
{
    uint64_t b;
    if (ms_parse_size(v, &b) != 0)
        return "is not a size (e.g. 64G)";
    if (b != 0 && b < (2ull << 20))
        return "must be at least 2M (or 0 for the device's memory)";
    cfg->expandable_va = b;
    return NULL;
}

static const char *ms_opt_trace(memsnap_alloc_config *cfg, const char *v)
{
    int b;
    const char *e = ms_parse_bool(v, &b);
    if (!e)
        cfg->trace = b;
    return e;
}

static const struct {
    const char *key;
    parse_fn parse;
} keys[] = {
    {"expandable_segments", ms_opt_expandable},
    {"max_split_size_mb", ms_opt_max_split},
    {"roundup_power2_divisions", ms_opt_roundup},
    {"garbage_collection_threshold", ms_opt_gc},
    {"device_limit", ms_opt_limit},
    {"expandable_va", ms_opt_va},
    {"trace", ms_opt_trace},
};

static void ms_trim(char **s)
{
    while (isspace((unsigned char)**s))
        (*s)++;
    char *e = *s + strlen(*s);
    while (e > *s && isspace((unsigned char)e[-1]))
        *--e = 0;
}

MS_EXPORT int memsnap_alloc_config_parse(memsnap_alloc_config *cfg, const char *s, char *err,
                               size_t errlen)
{
    char msg[512] = "";
    if (err && errlen)
        err[0] = 0;
    if (!s || !*s)
        return MEMSNAP_ALLOC_OK;
    char *copy = strdup(s);
    if (!copy) {
        ms_set_error("MEMSNAP_ALLOC_CONF: out of host memory");
        return MEMSNAP_ALLOC_ERR_NOMEM;
    }
    memsnap_alloc_config tmp = *cfg;
    int rc = MEMSNAP_ALLOC_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        ms_trim(&item);
        if (!*item)
            continue;
        char *colon = strchr(item, ':');
        if (!colon) {
            snprintf(msg, sizeof msg, "MEMSNAP_ALLOC_CONF: \"%s\" has no value (expected key:value)",
                         item);
            rc = MEMSNAP_ALLOC_ERR_INVALID;
            break;
        }
        *colon = 0;
        char *key = item, *val = colon + 1;
        ms_trim(&key);
        ms_trim(&val);
        size_t k;
        for (k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!strcmp(keys[k].key, key))
                break;
        if (k == sizeof keys / sizeof keys[0]) {
            {
                size_t n = (size_t)snprintf(msg, sizeof msg,
                                            "MEMSNAP_ALLOC_CONF: unknown key \"%s\" (value \"%s\"); "
                                            "known keys:", key, val);
                for (size_t j = 0; j < sizeof keys / sizeof keys[0] && n < sizeof msg; j++)
                    n += (size_t)snprintf(msg + n, sizeof msg - n, " %s", keys[j].key);
            }
            rc = MEMSNAP_ALLOC_ERR_INVALID;
            break;
        }
        const char *why = keys[k].parse(&tmp, val);
        if (why) {
            snprintf(msg, sizeof msg, "MEMSNAP_ALLOC_CONF: %s:\"%s\" %s", key, val, why);
            rc = MEMSNAP_ALLOC_ERR_INVALID;
            break;
        }
    }
    free(copy);
    if (rc == MEMSNAP_ALLOC_OK)
        *cfg = tmp;
    else {
        ms_set_error("%s", msg);
        if (err && errlen)
            snprintf(err, errlen, "%s", msg);
    }
    return rc;
}

MS_EXPORT int memsnap_alloc_config_from_env(memsnap_alloc_config *cfg, char *err, size_t errlen)
{
    memsnap_alloc_config_default(cfg);
    return memsnap_alloc_config_parse(cfg, getenv("MEMSNAP_ALLOC_CONF"), err, errlen);
}
