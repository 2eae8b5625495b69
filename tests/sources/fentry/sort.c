#include <stdlib.h>

/* qsort calls back into instrumented code from uninstrumented libc. */
static int compare(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

void sort_longs(long *v, int n) { qsort(v, (size_t)n, sizeof *v, compare); }
