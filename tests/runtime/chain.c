/* SIGTRAP that is not ours: an int3 in the program goes to the handler installed before the
 * runtime's (argument "prev"), or to the default action (no argument: the process dies by
 * SIGTRAP). bootprof_check notices a handler installed after ours. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <signal.h>
#include "bootprof.h"

static volatile int prev_ran;
static void prev(int s) { (void)s; prev_ran++; }
int main(int argc, char **argv) {
    if (argc > 1) signal(SIGTRAP, prev);
    CHECK(bootprof_enable("chain:*") == PER_PROBE, "%s", bootprof_last_error());
    BOOTPROF_PROBE(chain, p, 1);
    CHECK(bootprof_hits("chain:p") == 1, "our trap");
    CHECK(bootprof_check() == 1, "check before");
    __asm__ volatile("int3"); /* what __builtin_debugtrap does */
    CHECK(prev_ran == 1, "previous handler ran %d times", prev_ran);
    signal(SIGTRAP, prev);
    CHECK(bootprof_check() == 0, "check after the program took SIGTRAP");
    printf("chained to the previous handler; check noticed the new one\n");
    return 0;
}
