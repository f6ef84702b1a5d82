/* Reading a result object: the JSON that report.c and job.c build (summary
 * --json, a job's rank records), whose byte counts are raw numbers
 * (add_u64 writes them as cJSON raw text, so every uint64 is exact).  The
 * one set of getters for every reader of such an object: the job's map and
 * reduce, and cli/'s printers.  Absent members read 0, "" or null. */
#ifndef MEMSNAP_ANALYZE_RESULT_JSON_H
#define MEMSNAP_ANALYZE_RESULT_JSON_H

#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

/* Member key of o, or NULL. */
static inline const cJSON *jo(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* An unsigned integer member (raw or a positive number), 0 when absent. */
static inline uint64_t ju(const cJSON *o, const char *key)
{
    const cJSON *v = jo(o, key);
    if (cJSON_IsRaw(v))
        return strtoull(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* A signed integer member (device ordinals, CUresults), 0 when absent. */
static inline int ji(const cJSON *o, const char *key)
{
    const cJSON *v = jo(o, key);
    return cJSON_IsNumber(v) ? v->valueint : 0;
}

/* A string member, "" when absent. */
static inline const char *js(const cJSON *o, const char *key)
{
    const cJSON *v = jo(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Whether a member is absent or null. */
static inline int jnull(const cJSON *o, const char *key)
{
    const cJSON *v = jo(o, key);
    return !v || cJSON_IsNull(v);
}

#endif
