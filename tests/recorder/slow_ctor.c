/* A library whose constructor takes a second (case signal-early): loaded
 * after the recorder into a program that execs, it holds the exec'd image
 * where the dump signal's default action would kill it (as a sanitizer's
 * start-up, a large program's constructors, or env and launchers' exec
 * do). */
#include <time.h>

__attribute__((constructor)) static void slow_ctor(void)
{
    struct timespec ts = {1, 0};
    while (nanosleep(&ts, &ts) != 0) {
    }
}
