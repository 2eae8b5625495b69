// An archive member the program needs.
#include "bootprof.h"

__attribute__((noinline)) static int twice(int x) { return 2 * x; }

__attribute__((noinline)) int work(int x) {
    BOOTPROF_PROBE(lib, work, x);
    return twice(x) + 1;
}
