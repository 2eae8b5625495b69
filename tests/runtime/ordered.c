/* Two probes in two functions, the first's sites before the second's in the site table (each
 * function's sites together, in the order the functions are in the text). Prints each probe's
 * hits after one call of each. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

__attribute__((noinline)) static void first(void) { BOOTPROF_PROBE(order, first, 1); }
__attribute__((noinline)) static void second(void) { BOOTPROF_PROBE(order, second, 2); }

int main(void) {
    first();
    second();
    printf("first %ld second %ld\n", bootprof_hits("order:first"), bootprof_hits("order:second"));
    return 0;
}
