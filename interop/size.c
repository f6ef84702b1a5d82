/* Sizes as users write them on the command line ("80G", "512MiB", a plain
 * byte count), for replay's --device-mem.  Kept apart from replay.c, which
 * needs the CUDA headers, so that a reader-only build has it too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "interop.h"

/* Contract in interop.h. */
int msnap_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    uint64_t mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    case 't': case 'T': mul = 1ull << 40; end++; break;
    }
    if (mul > 1 && (!strcmp(end, "iB") || !strcmp(end, "B")))
        end += strlen(end);
    if (*end || (v && v > UINT64_MAX / mul))
        return -1;
    *out = v * mul;
    return 0;
}
