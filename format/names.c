/* Names of actions and APIs, generated from the X-macros in format.h.
 *
 * The file always carries names, never enum numbers, so the numbering in the
 * header may change freely.  The lookups are on the reader's per-event path:
 * each table keeps the length of every name next to it, so a lookup compares
 * lengths and first bytes before calling memcmp (about 25 cheap compares in
 * the worst case, no hashing, no allocation, no initialisation order). */
#include <string.h>

#include "memsnap/format.h"
#include "internal.h"

typedef struct name_entry {
    const char *s;
    unsigned char len;
} name_entry;

static const name_entry action_names[] = {
#define MSNAP_X_NAME(e, s) {s, sizeof(s) - 1},
    MSNAP_ACTIONS(MSNAP_X_NAME)
#undef MSNAP_X_NAME
};

static const name_entry api_names[] = {
#define MSNAP_X_NAME(e, s) {s, sizeof(s) - 1},
    MSNAP_APIS(MSNAP_X_NAME)
#undef MSNAP_X_NAME
};

/* Index of span (s, n) in table t of count entries, or -1. */
static int lookup(const name_entry *t, int count, const char *s, size_t n)
{
    if (n == 0 || n > 255)
        return -1;
    for (int i = 0; i < count; i++) {
        if (t[i].len == n && t[i].s[0] == s[0] && memcmp(t[i].s, s, n) == 0)
            return i;
    }
    return -1;
}

/* Name of an action; "?" when out of range. */
const char *msnap_action_name(int action)
{
    if (action < 0 || action >= MSNAP_A_COUNT)
        return "?";
    return action_names[action].s;
}

/* Action for a name; -1 when unknown or NULL. */
int msnap_action_from_name(const char *name)
{
    if (!name)
        return -1;
    return lookup(action_names, MSNAP_A_COUNT, name, strlen(name));
}

/* Name of an API; "?" when out of range. */
const char *msnap_api_name(int api)
{
    if (api < 0 || api >= MSNAP_API_COUNT)
        return "?";
    return api_names[api].s;
}

/* API for a name; -1 when unknown or NULL. */
int msnap_api_from_name(const char *name)
{
    if (!name)
        return -1;
    return lookup(api_names, MSNAP_API_COUNT, name, strlen(name));
}

int msnap__action_from_span(const char *s, size_t n)
{
    return lookup(action_names, MSNAP_A_COUNT, s, n);
}

int msnap__api_from_span(const char *s, size_t n)
{
    return lookup(api_names, MSNAP_API_COUNT, s, n);
}
