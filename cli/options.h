/* options: the usage errors every subcommand prints, said one way.
 *
 *   memsnap SUB: unknown option "--x"; try memsnap SUB --help
 *   memsnap SUB: option "--top" needs a value; try memsnap SUB --help
 *   memsnap SUB: option "--json" takes no value; try memsnap SUB --help
 *   memsnap SUB: <what cli_usage_error was given>; try memsnap SUB --help
 *
 * One line on stderr, pointing at the subcommand's own help; both return 2,
 * the exit status of a usage error (cli/memsnap.c), so a caller writes
 * `return cli_option_error(...)`.
 */
#ifndef MEMSNAP_CLI_OPTIONS_H
#define MEMSNAP_CLI_OPTIONS_H
#include <getopt.h>

/* After getopt_long returned '?' or ':' for argv (opterr = 0, any optstring,
 * a leading ':' or not): says which option was wrong and how, from
 * optind/optopt and the same shortopts and longopts getopt_long was given
 * (they tell an unknown option from a known one that lacks its value or
 * was given one it does not take).  sub: the subcommand's name ("summary").
 * Returns 2. */
int cli_option_error(const char *sub, char *const argv[], const char *shortopts,
                     const struct option *longopts);

/* Any other usage error of subcommand sub: the message from fmt (printf
 * style, no trailing newline), then "; try memsnap SUB --help".  Returns 2. */
int cli_usage_error(const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
