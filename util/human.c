/* Sizes and times for people (human.h).  Binary units
 * throughout: GPU capacities and allocator granularities are powers of
 * two, and a decimal GB beside a binary GiB would make figures disagree. */
#include "human.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

const char *msnap_size_text(uint64_t bytes, char *buf, size_t cap)
{
    if (bytes < 1024) {
        snprintf(buf, cap, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    int u = 1;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

const char *msnap_size_or_bytes(uint64_t bytes, int exact, char *buf, size_t cap)
{
    if (!exact)
        return msnap_size_text(bytes, buf, cap);
    snprintf(buf, cap, "%" PRIu64, bytes);
    return buf;
}

const char *msnap_size_text_short(uint64_t bytes, char *buf, size_t cap)
{
    int u = 0;
    double d = (double)bytes;
    while (d >= 1024.0 && u < 6) {
        d /= 1024.0;
        u++;
    }
    if (fabs(d - round(d)) < 0.005)
        snprintf(buf, cap, "%.0f %s", d, units[u]);
    else if (fabs(d * 10 - round(d * 10)) < 0.05)
        snprintf(buf, cap, "%.1f %s", d, units[u]);
    else
        snprintf(buf, cap, "%.2f %s", d, units[u]);
    return buf;
}

const char *msnap_time_text(uint64_t ns, char *buf, size_t cap)
{
    if (ns < 1000)
        snprintf(buf, cap, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, cap, "%.3f us", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, cap, "%.3f ms", (double)ns / 1e6);
    else if (ns < 120000000000ull)
        snprintf(buf, cap, "%.3f s", (double)ns / 1e9);
    else if (ns < 7200000000000ull)
        snprintf(buf, cap, "%.2f min", (double)ns / 60e9);
    else
        snprintf(buf, cap, "%.2f h", (double)ns / 3600e9);
    return buf;
}

int msnap_time_parse(const char *s, uint64_t *ns)
{
    if ((s[0] < '0' || s[0] > '9') && s[0] != '.')
        return -1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0))
        return -1;
    double mul;
    if (!*end || !strcmp(end, "s")) mul = 1e9;
    else if (!strcmp(end, "ms")) mul = 1e6;
    else if (!strcmp(end, "us")) mul = 1e3;
    else if (!strcmp(end, "ns")) mul = 1;
    else if (!strcmp(end, "min") || !strcmp(end, "m")) mul = 60e9;
    else if (!strcmp(end, "h")) mul = 3600e9;
    else return -1;
    double t = v * mul;
    if (!(t < 1.8e19))
        return -1;
    *ns = (uint64_t)llround(t);
    return 0;
}
