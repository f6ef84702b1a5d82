/* jsonw: JSON string output.  Strings from snapshots are UTF-8 already (the
 * format guarantees it); we escape quotes, backslashes and control bytes. */
#include "common.h"

void jw_str(FILE *f, const char *s)
{
    putc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') {
            putc('\\', f);
            putc(*p, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            putc(*p, f);
        }
    }
    putc('"', f);
}
