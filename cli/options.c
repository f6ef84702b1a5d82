/* options: one way to say a usage error (options.h has the contract). */
#include "options.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The entry of longopts that the argument "--name[=value]" selected, as
 * getopt_long matches it (the exact name, else the one name it is a prefix
 * of), whose val is val; NULL when none. */
static const struct option *long_entry(const struct option *longopts, const char *arg, int val)
{
    size_t n = strcspn(arg, "=");
    const struct option *prefix = NULL;
    int nprefix = 0;
    for (const struct option *o = longopts; o && o->name; o++) {
        if (strncmp(o->name, arg, n))
            continue;
        if (strlen(o->name) == n)
            return o->val == val ? o : NULL;
        prefix = o;
        nprefix++;
    }
    return nprefix == 1 && prefix->val == val ? prefix : NULL;
}

/* Contract in options.h. */
int cli_option_error(const char *sub, char *const argv[], const char *shortopts,
                     const struct option *longopts)
{
    /* optind has moved past a long option, or past the last letter of a
     * group of short ones; after an unknown letter inside a group (-xq) it
     * still points at the group, so argv[optind - 1] is then not the culprit:
     * optopt says the letter. */
    const char *arg = optind > 0 ? argv[optind - 1] : NULL;
    const char *how = "unknown option";
    char name[128];
    if (arg && arg[0] == '-' && arg[1] == '-' && arg[2] &&
        (optopt == 0 || long_entry(longopts, arg + 2, optopt))) {
        const struct option *o = optopt ? long_entry(longopts, arg + 2, optopt) : NULL;
        snprintf(name, sizeof name, "--%.*s", (int)strcspn(arg + 2, "="), arg + 2);
        if (o)
            how = o->has_arg == no_argument ? "takes no value" : "needs a value";
    } else {
        int c = optopt > 0 && optopt < 128 ? optopt : '?';
        snprintf(name, sizeof name, "-%c", c);
        const char *s = shortopts ? shortopts + strspn(shortopts, "+-:") : NULL;
        s = s && c != '?' && c != ':' ? strchr(s, c) : NULL;
        if (s && s[1] == ':')
            how = "needs a value";
    }
    if (!strcmp(how, "unknown option"))
        fprintf(stderr, "memsnap %s: unknown option \"%s\"; try memsnap %s --help\n", sub, name,
                sub);
    else
        fprintf(stderr, "memsnap %s: option \"%s\" %s; try memsnap %s --help\n", sub, name, how,
                sub);
    return 2;
}

/* Contract in options.h. */
int cli_usage_error(const char *sub, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "memsnap %s: ", sub);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "; try memsnap %s --help\n", sub);
    return 2;
}
