/* Unit test of the recorder's stack table (recorder/stacktab.c): ids are
 * stable and unique per distinct stack, frames come back exactly, concurrent
 * interning agrees on ids, and a full table or arena degrades to id 0 with a
 * count instead of failing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "../../recorder/stacktab.h"

#define NSTACKS 5000
#define NTHREADS 8
static uint64_t stacks[NSTACKS][32];
static int depths[NSTACKS];
static uint32_t ids[NTHREADS][NSTACKS];
static stacktab shared;

static void make_stacks(void)
{
    unsigned seed = 12345;
    for (int i = 0; i < NSTACKS; i++) {
        depths[i] = 1 + rand_r(&seed) % 32;
        for (int f = 0; f < depths[i]; f++)
            stacks[i][f] = 0x400000u + (uint64_t)(rand_r(&seed) % 4096) * 16;
        stacks[i][0] = 0x7f0000000000ull + (uint64_t)i * 8; /* all distinct */
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < NSTACKS; k++) {
        int i = (k * 7919 + t * 104729) % NSTACKS;   /* a different order per thread */
        ids[t][i] = stacktab_intern(&shared, stacks[i], depths[i]);
    }
    return NULL;
}

int main(void)
{
    make_stacks();

    /* Basics. */
    stacktab t;
    CHECK(stacktab_init(&t, 1000, 24000) == 0);
    uint64_t a[3] = {1, 2, 3}, b[3] = {1, 2, 4}, c[2] = {1, 2};
    uint32_t ia = stacktab_intern(&t, a, 3);
    CHECK(ia == 1);
    CHECK(stacktab_intern(&t, a, 3) == ia);
    uint32_t ib = stacktab_intern(&t, b, 3), ic = stacktab_intern(&t, c, 2);
    CHECK(ib == 2 && ic == 3);            /* same prefix, other depth: other id */
    const uint64_t *ips;
    CHECK(stacktab_get(&t, ib, &ips) == 3 && ips[2] == 4);
    CHECK(stacktab_get(&t, 0, &ips) == -1);
    CHECK(stacktab_get(&t, 99, &ips) == -1);
    CHECK(stacktab_count(&t) == 3);
    /* The key folded frame by frame (as the Python walk does) finds the
     * same stacks; another key does not find them (it stores a copy). */
    stacktab_key k = STACKTAB_KEY_START;
    for (int i = 0; i < 3; i++)
        stacktab_key_step(&k, b[i]);
    stacktab_key kb = k;
    stacktab_key_end(&kb, 3);
    CHECK(stacktab_intern_keyed(&t, b, 3, kb) == ib);
    stacktab_key k2 = k;
    stacktab_key_end(&k2, 2);
    CHECK(stacktab_intern_keyed(&t, b, 3, k2) == 4);
    /* Two stacks whose 64-bit hashes meet are told apart by the check,
     * found again by both, and their frames come back (the stored frames
     * are not compared: a found stack's frames are never read). */
    uint64_t d[2] = {7, 8}, e[2] = {9, 10};
    stacktab_key kd = {0x5151515151515151ull, 1}, ke = {0x5151515151515151ull, 2};
    uint32_t id_d = stacktab_intern_keyed(&t, d, 2, kd);
    uint32_t id_e = stacktab_intern_keyed(&t, e, 2, ke);
    CHECK(id_d == 5 && id_e == 6);
    CHECK(stacktab_intern_keyed(&t, d, 2, kd) == id_d);
    CHECK(stacktab_intern_keyed(&t, e, 2, ke) == id_e);
    CHECK(stacktab_get(&t, id_e, &ips) == 2 && ips[0] == 9 && ips[1] == 10);
    /* The check follows the frames, not the hash: the same frames in
     * another order differ in both halves. */
    uint64_t f1[3] = {1, 2, 3}, f2[3] = {3, 2, 1};
    stacktab_key a1 = STACKTAB_KEY_START, a2 = STACKTAB_KEY_START;
    for (int i = 0; i < 3; i++) {
        stacktab_key_step(&a1, f1[i]);
        stacktab_key_step(&a2, f2[i]);
    }
    stacktab_key_end(&a1, 3);
    stacktab_key_end(&a2, 3);
    CHECK(a1.hash != a2.hash && a1.check != a2.check && a1.check <= UINT32_MAX);
    stacktab_destroy(&t);

    /* Concurrency: every thread gets the same id for the same stack. */
    CHECK(stacktab_init(&shared, NSTACKS * 2, NSTACKS * 32) == 0);
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    int agree = 1, frames_ok = 1;
    char *seen = calloc(NSTACKS + 1, 1);
    int unique = 1;
    for (int i = 0; i < NSTACKS; i++) {
        for (int k = 1; k < NTHREADS; k++)
            if (ids[k][i] != ids[0][i])
                agree = 0;
        uint32_t id = ids[0][i];
        if (id == 0 || id > NSTACKS || seen[id])
            unique = 0;
        else
            seen[id] = 1;
        if (stacktab_get(&shared, id, &ips) != depths[i] ||
            memcmp(ips, stacks[i], (size_t)depths[i] * 8) != 0)
            frames_ok = 0;
    }
    CHECK(agree);
    CHECK(unique);
    CHECK(frames_ok);
    CHECK_EQ_U64(stacktab_count(&shared), NSTACKS);
    CHECK_EQ_U64(stacktab_dropped(&shared), 0);
    free(seen);
    stacktab_destroy(&shared);

    /* A full table: 100 ids, then 0 and a count; stored ones still found. */
    CHECK(stacktab_init(&t, 100, 100 * 32) == 0);
    int stored = 0;
    for (int i = 0; i < 150; i++)
        stored += stacktab_intern(&t, stacks[i], depths[i]) != 0;
    CHECK(stored == 100);
    CHECK(stacktab_dropped(&t) >= 50);
    int still = 0;
    for (int i = 0; i < 150; i++) {
        uint32_t id = stacktab_intern(&t, stacks[i], depths[i]);
        if (id && stacktab_get(&t, id, &ips) == depths[i] &&
            memcmp(ips, stacks[i], (size_t)depths[i] * 8) == 0)
            still++;
    }
    CHECK(still == 100);
    stacktab_destroy(&t);

    /* A full arena: 50 frames hold five 10-frame stacks. */
    CHECK(stacktab_init(&t, 100, 50) == 0);
    uint64_t s10[10];
    stored = 0;
    for (int i = 0; i < 8; i++) {
        for (int f = 0; f < 10; f++)
            s10[f] = (uint64_t)i * 100 + (uint64_t)f + 1;
        stored += stacktab_intern(&t, s10, 10) != 0;
    }
    CHECK(stored == 5);
    CHECK(stacktab_dropped(&t) == 3);
    stacktab_destroy(&t);
    return check_summary();
}
