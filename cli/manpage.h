/* Man pages and shell completion generated from the CLI's own help texts
 * (manpage.c): one source for --help, the man pages and completion. */
#ifndef MEMSNAP_CLI_MANPAGE_H
#define MEMSNAP_CLI_MANPAGE_H
#include <stddef.h>
#include <stdio.h>

/* A subcommand as the index page lists it. */
typedef struct memsnap_man_entry {
    const char *name;
    const char *synopsis;
} memsnap_man_entry;

/* Writes the roff page memsnap-NAME(1) to f, made from what
 * fn(2, {name, "--help"}) prints.  0, or -1 (nothing captured, or f failed). */
int memsnap_man_page(FILE *f, const char *name, const char *synopsis,
                     int (*fn)(int, char **), const char *version);

/* Writes memsnap(1), listing the n subcommands, to f.  0, or -1. */
int memsnap_man_index(FILE *f, const memsnap_man_entry *subs, size_t n, const char *version);

#endif
