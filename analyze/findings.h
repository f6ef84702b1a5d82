/* Findings over the state model: what a snapshot says beyond its levels.
 * The renderer's model (model.c) feeds them as it replays; `memsnap
 * summary` prints them, render and compare draw them, all with the same
 * numbers (cli/ prints, viz/ draws, this file decides).
 *
 *   leak suspects   a zigzag valley detector over the stacked total T (all
 *                   devices): a site whose live bytes at successive valleys
 *                   keep rising (sm_leakfinder below);
 *   fragmentation   at one moment, inside reserved: 1 - largest free block
 *                   / total free (sm_frag_free); over the run: 1 - peak
 *                   allocated / peak reserved (sm_frag_peak);
 *   the OOM story   what the numbers of a failed allocation say
 *                   (sm_oom_verdict).
 *
 * Leak finder.  A zigzag detector with threshold thr = max(1% of the
 * largest T so far, 1 byte) finds the valleys of T: falling by thr from a
 * maximum starts a descent, each new minimum becomes the candidate valley,
 * and rising by thr above it confirms the candidate.  The live bytes of
 * every site *at the candidate* are kept lazily: a site touched after the
 * candidate first saves its live bytes in `snap` (copy-on-write, versioned
 * by cand_ver), so confirming a valley costs only the sites touched since
 * the previous one (the dirty list), never a walk over all sites.  A site
 * is a suspect when, over at least 3 valleys, its bytes at valleys rose at
 * least twice, fell at most a third as often as they rose, ended above
 * where they started, and the site still holds memory at the end.
 */
#ifndef MEMSNAP_ANALYZE_FINDINGS_H
#define MEMSNAP_ANALYZE_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct sm_leakfinder {
    uint64_t T;                  /* the stacked total, kept by the caller */
    uint64_t lk_max, lk_min, lk_maxever, cand_ver, serial, nvalleys;
    uint64_t floor_first, floor_last; /* T at the first / latest valley */
    int falling;
    uint32_t *dirty;             /* sites touched since the last valley */
    size_t ndirty, cap_dirty;
    sm_leak *leaks;              /* after sm_lf_finish, largest growth first */
    size_t nleaks;
} sm_leakfinder;

/* Before site idx's live bytes change.  0 ok, -1 out of memory. */
int sm_lf_touch(sm_leakfinder *f, sm_site *s, uint32_t idx);
/* After f->T changed; sites of class cls take part.  0 ok, -1 no memory. */
int sm_lf_step(sm_leakfinder *f, sm_site *sites, int cls);
/* Starts over from total T (the stacked layer changed meaning). */
void sm_lf_restart(sm_leakfinder *f, uint64_t T);
/* Lists the suspects among sites[0..n) of class cls.  0 ok, -1 no memory. */
int sm_lf_finish(sm_leakfinder *f, const sm_site *sites, size_t n, int cls);
void sm_lf_free(sm_leakfinder *f);

/* 1 - largest_free/total_free inside reserved; 0 when nothing is free. */
double sm_frag_free(uint64_t total_free, uint64_t largest_free);
/* 1 - peak_allocated/peak_reserved; -1 when nothing was reserved. */
double sm_frag_peak(uint64_t peak_allocated, uint64_t peak_reserved);
/* What the numbers of an OOM say, in one sentence. */
const char *sm_oom_verdict(const sm_oom *o);

#endif
