/* BOOTPROF_ENABLE applies before the program's first constructor. Prints what the first
 * constructor saw. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include "bootprof.h"

static long seen_in_ctor = -1;
__attribute__((constructor(101))) static void first(void) {
    BOOTPROF_PROBE(boot, first, 1);
    seen_in_ctor = bootprof_hits("boot:first");
}
int main(void) {
    printf("hits seen in the first constructor: %ld\n", seen_in_ctor);
    return 0;
}
