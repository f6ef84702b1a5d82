/* parallel: the commands that read several snapshots (summary, job,
 * render, compare) read them on several threads (-j N), and print exactly
 * what one thread would.
 *
 *   par_run   work(i) for every file on up to N threads; take(i) on the
 *             calling thread in file order, each as soon as it and every
 *             file before it are done; a take that returns non-zero stops
 *             the run (no new work starts), as a one-thread loop would
 *             stop at the first unreadable file.
 *
 * With N = 1 it is that loop: work(0), take(0), work(1), ...  With N > 1
 * and a progress line on the terminal, the readers' reports are summed
 * into one line, "reading N files", bytes of all of them.  Each file is
 * read by the analysis library, whose separate reads share nothing
 * (job.h, analysis.h); a thread of its own also parses ahead for each
 * (analyze/readahead.c), so a read uses up to two cores.
 */
#ifndef MEMSNAP_CLI_PARALLEL_H
#define MEMSNAP_CLI_PARALLEL_H

/* Runs work(ctx, i) for i in [0, n) on up to jobs threads (at most 2 x
 * jobs files ahead of the one taken) and take(ctx, i, rc) in order, rc
 * being work's return value.  Returns 0, or the first non-zero take. */
int par_run(int n, int jobs, int (*work)(void *ctx, int i),
            int (*take)(void *ctx, int i, int rc), void *ctx, char **paths);

/* The default of -j: the cores this process may run on (1 at least). */
int par_default_jobs(void);

/* -j N / --jobs N of subcommand sub: a count from 1 to 1024 into *jobs.
 * 0 ok, else 2 after the usage error. */
int par_parse_jobs(const char *sub, const char *arg, int *jobs);

#endif
