/* The memsnap CLI: one function per subcommand, dispatched from a table in
 * memsnap.c.  Exit codes: 0 ok, 1 a finding (e.g. an OOM in the snapshot,
 * where a subcommand documents it), 2 bad input or usage. */
#ifndef MEMSNAP_CLI_H
#define MEMSNAP_CLI_H
int cmd_run(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_flame(int argc, char **argv);
#endif
