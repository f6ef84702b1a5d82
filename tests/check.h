/* A tiny test harness: CHECK(cond) reports file:line and the condition and
 * counts failures; test programs return check_summary() from main, which
 * prints "N passed, N failed" and returns non-zero on any failure. */
#ifndef MEMSNAP_CHECK_H
#define MEMSNAP_CHECK_H
#include <stdio.h>
#include <stdlib.h>

static int check_passed_, check_failed_;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (cond) {                                                            \
            check_passed_++;                                                   \
        } else {                                                               \
            check_failed_++;                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,   \
                    #cond);                                                    \
        }                                                                      \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                     \
    do {                                                                       \
        unsigned long long va_ = (unsigned long long)(a),                      \
                           vb_ = (unsigned long long)(b);                      \
        if (va_ == vb_) {                                                      \
            check_passed_++;                                                   \
        } else {                                                               \
            check_failed_++;                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%llu != %llu)\n",  \
                    __FILE__, __LINE__, #a, #b, va_, vb_);                     \
        }                                                                      \
    } while (0)

/* Exit code 77 tells ctest the test was skipped (SKIP_RETURN_CODE 77). */
#define CHECK_SKIP(...)                                                        \
    do {                                                                       \
        printf("SKIP: " __VA_ARGS__);                                          \
        printf("\n");                                                          \
        exit(77);                                                              \
    } while (0)

static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", check_passed_, check_failed_);
    return check_failed_ ? 1 : 0;
}
#endif
