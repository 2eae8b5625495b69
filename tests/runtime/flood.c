/* Many events: with a small buffer the first ones are kept and the rest dropped and counted.
 * With an argument, raises SIGUSR2 half way (BOOTPROF_DUMP_SIGNAL=USR2 dumps then) and waits for
 * the dump to appear before going on. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) static void tick(long i) { BOOTPROF_PROBE(flood, tick, i); __asm__ volatile(""); }

int main(int argc, char **argv) {
    for (long i = 0; i < 5000; i++) {
        tick(i);
        if (argc > 1 && i == 2500) {
            struct stat st;
            raise(SIGUSR2);
            for (int w = 0; w < 500 && stat(argv[1], &st) != 0; w++) usleep(10000);
            CHECK(stat(argv[1], &st) == 0, "no dump after the signal");
            printf("dumped on signal: %ld bytes\n", (long)st.st_size);
        }
    }
    return 0;
}
