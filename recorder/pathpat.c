/* Output path patterns, shared by the recorder (which writes the files) and
 * `memsnap run` (which finds them afterwards).
 *
 *   %p pid   %h host name   %n dump number   %t start time (unix seconds)
 *   %q{VAR}  the value of environment variable VAR ("unset" when unset or
 *            empty; '/' becomes '_' so a value cannot leave the folder)
 *   %%       a percent sign; any other %x is kept as it is
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pathpat.h"

int pathpat_expand(const char *pat, long pid, uint64_t n, uint64_t t_s, char *dst, size_t cap)
{
    size_t o = 0;
    char tmp[256];
    if (!cap)
        return -1;
    for (const char *p = pat; *p;) {
        const char *add = tmp;
        size_t addn;
        if (*p != '%' || !p[1]) {
            tmp[0] = *p++;
            tmp[1] = 0;
        } else {
            char c = p[1];
            p += 2;
            switch (c) {
            case 'p': snprintf(tmp, sizeof tmp, "%ld", pid); break;
            case 'n': snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)n); break;
            case 't': snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)t_s); break;
            case 'h':
                if (gethostname(tmp, sizeof tmp) != 0)
                    snprintf(tmp, sizeof tmp, "host");
                tmp[sizeof tmp - 1] = 0;
                break;
            case '%': add = "%"; break;
            case 'q': {
                const char *end = *p == '{' ? strchr(p, '}') : NULL;
                if (!end || end - p - 1 >= (long)sizeof tmp) {
                    add = "%q";
                    break;
                }
                char var[256];
                memcpy(var, p + 1, (size_t)(end - p - 1));
                var[end - p - 1] = 0;
                const char *v = getenv(var);
                snprintf(tmp, sizeof tmp, "%s", v && *v ? v : "unset");
                for (char *q = tmp; *q; q++)
                    if (*q == '/')
                        *q = '_';
                p = end + 1;
                break;
            }
            default:
                tmp[0] = '%';
                tmp[1] = c;
                tmp[2] = 0;
                break;
            }
        }
        addn = strlen(add);
        if (o + addn + 1 > cap)
            return -1;
        memcpy(dst + o, add, addn);
        o += addn;
    }
    dst[o] = 0;
    return 0;
}
