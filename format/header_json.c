/* msnap_fmt_header: the header line with its settings normalized through
 * cJSON (format.h).  A file of its own so that a writer that uses only
 * msnap_fmt_header_compact (the recorder) does not pull cJSON in from the
 * static library. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "memsnap/format.h"

size_t msnap_fmt_header(char *buf, size_t cap, const msnap_header *h)
{
    msnap_header c = *h;
    char *settings = NULL;
    if (h->settings_json) {
        cJSON *o = cJSON_Parse(h->settings_json);
        if (cJSON_IsObject(o))
            settings = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
    }
    c.settings_json = settings;
    size_t n = msnap_fmt_header_compact(buf, cap, &c);
    free(settings);
    return n;
}
