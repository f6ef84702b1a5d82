/* spill: fixed-size event records in an unlinked temporary file, so that an
 * export or import can regroup events (per device, in time order) without
 * holding them in memory.  tmpfile() lives in $TMPDIR or /tmp and vanishes
 * when closed or when the process dies. */
#include "common.h"

#include <errno.h>

int spill_put(spill *s, const spill_rec *r)
{
    if (!s->f && !(s->f = tmpfile()))
        return -1;
    if (fwrite(r, sizeof *r, 1, s->f) != 1)
        return -1;
    s->n++;
    return 0;
}

int spill_rewind(spill *s)
{
    if (!s->f)
        return 0;
    if (fflush(s->f) || fseek(s->f, 0, SEEK_SET))
        return -1;
    return 0;
}

int spill_get(spill *s, spill_rec *r)
{
    if (!s->f)
        return 0;
    if (fread(r, sizeof *r, 1, s->f) == 1)
        return 1;
    return ferror(s->f) ? -1 : 0;
}

void spill_close(spill *s)
{
    if (s->f)
        fclose(s->f);
    s->f = NULL;
    s->n = 0;
}

int spill_reopen(spill *s)
{
    if (!s->f)
        return 0;
    char p[64];
    if (fflush(s->f))
        return -1;
    snprintf(p, sizeof p, "/proc/self/fd/%d", fileno(s->f));
    FILE *g = fopen(p, "rb");
    if (!g)
        return -1;
    fclose(s->f);
    s->f = g;
    return 0;
}
