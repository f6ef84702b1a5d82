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
int cmd_job(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_torch_setup(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* The job view of n files (cmd_job.c): read on up to jobs threads, printed
 * as text or JSON; sub names the command in messages.  Returns the exit
 * status (0, 1 an OOM, 2). */
int job_run(const char *sub, char **paths, int n, int json, int jobs);

/* 0 when every MEMSNAP_* variable now set is valid for the recorder;
 * -1 after printing one line per bad value (run_settings.c). */
int memsnap_cli_check_settings(void);
#endif
