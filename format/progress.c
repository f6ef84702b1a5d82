/* progress: a process-wide hook through which long work (readers of
 * snapshots, importers, exporters, replay) reports how far it got, so that
 * the CLI can draw one progress line without each loop knowing about
 * terminals.  Nothing is reported until a hook is set (the recorder never
 * sets one).  format.h, "Progress", is the contract. */
#include "memsnap/format.h"

static msnap_progress_fn g_fn;
static void *g_ctx;

/* Installs fn (NULL: none) for every later report. */
void msnap_set_progress(msnap_progress_fn fn, void *ctx)
{
    g_fn = fn;
    g_ctx = ctx;
}

/* Hands one report to the hook, if any. */
void msnap_progress(const char *what, uint64_t done, uint64_t total, int bytes)
{
    if (g_fn)
        g_fn(g_ctx, what, done, total, bytes);
}
