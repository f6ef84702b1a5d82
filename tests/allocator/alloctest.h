/* Shared helpers of the allocator tests on the simulated device: the simdev
 * helpers (sim_start, sim.*, CK), plus ACK() for allocator calls and
 * CHECK_INV() that runs the invariant walker and prints its message. */
#ifndef ALLOCTEST_H
#define ALLOCTEST_H
#include "../simdev/simtest.h"
#include "memsnap/alloc.h"

#define ACK(call)                                                                            \
    do {                                                                                     \
        int rc_ = (call);                                                                    \
        if (rc_ != MEMSNAP_ALLOC_OK)                                                         \
            fprintf(stderr, "%s:%d: %s -> %d: %s\n", __FILE__, __LINE__, #call, rc_,         \
                    memsnap_alloc_error());                                                  \
        CHECK(rc_ == MEMSNAP_ALLOC_OK);                                                      \
    } while (0)

#define CHECK_INV(a)                                                                         \
    do {                                                                                     \
        char m_[512];                                                                        \
        int r_ = memsnap_alloc_check((a), m_, sizeof m_);                                    \
        if (r_)                                                                              \
            fprintf(stderr, "%s:%d: invariant: %s\n", __FILE__, __LINE__, m_);              \
        CHECK(r_ == 0);                                                                      \
    } while (0)

static inline memsnap_alloc *make_alloc(const char *conf)
{
    memsnap_alloc_config cfg;
    memsnap_alloc_config_default(&cfg);
    char err[256];
    if (memsnap_alloc_config_parse(&cfg, conf, err, sizeof err) != 0) {
        fprintf(stderr, "FATAL: config %s: %s\n", conf, err);
        exit(1);
    }
    memsnap_alloc *a = NULL;
    if (memsnap_alloc_create(&cfg, 0, NULL, &a) != 0) {
        fprintf(stderr, "FATAL: create: %s\n", memsnap_alloc_error());
        exit(1);
    }
    return a;
}

static inline memsnap_alloc_stats stats_of(memsnap_alloc *a)
{
    memsnap_alloc_stats s;
    memsnap_alloc_stats_get(a, &s);
    return s;
}
#endif
