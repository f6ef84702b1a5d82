/* replay in a reader-only build (no CUDA toolkit): replay runs the
 * allocator, libmemsnap_alloc, on the simulated device, and both need the
 * CUDA headers to build; this stands in for replay.c and says so. */
#include <stdio.h>

#include "whatif.h"
#include "interop/interop.h"
#include "requests.h"

static const char absent[] =
    "this memsnap is a reader-only build (no CUDA toolkit): replay and predict need "
    "the simulated device and libmemsnap_alloc, which it does not have";

/* Always -1: replay and predict say this before reading anything. */
int msnap_replay_available(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* Always -1, with a message in err naming what is missing. */
int msnap_replay(const char *in_path, const msnap_replay_opts *opt, msnap_replay_result *res,
                 char *err, size_t errlen)
{
    (void)in_path, (void)opt, (void)res;
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* Always -1, as msnap_replay. */
int msnap_replay_stream(rq_stream *q, const msnap_replay_opts *opt, msnap_replay_result *res,
                        char *err, size_t errlen)
{
    (void)q, (void)opt, (void)res;
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* Always -1, as msnap_replay. */
int msnap_replay_many(rq_stream *q, const msnap_replay_opts *opts, int n, int jobs,
                      int show, msnap_replay_result *res, char *err, size_t errlen)
{
    (void)q, (void)opts, (void)n, (void)jobs, (void)show, (void)res;
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* Always -1, as msnap_replay. */
int msnap_replay_streams(rq_stream *const *qs, const msnap_replay_opts *opts, int n, int jobs,
                         const char *show, msnap_replay_result *res, char *err, size_t errlen)
{
    (void)qs, (void)opts, (void)n, (void)jobs, (void)show, (void)res;
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* Always -1, as msnap_replay: the check is part of the replay. */
int msnap_replay_check_conf(const char *conf, int torch, char *err, size_t errlen)
{
    (void)conf, (void)torch;
    snprintf(err, errlen, "%s", absent);
    return -1;
}

/* The engine the stream would take (the replay itself is absent). */
int msnap_replay_engine_of(const rq_stream *q)
{
    return q->torch ? MSNAP_ENGINE_TORCH : MSNAP_ENGINE_MEMSNAP;
}
