/* Files the runtime creates, in a directory someone else could write to: before its first
 * probe, the program plants symlinks to a victim file under the names the trace dump used to
 * write through (OUTPUT with its extension replaced by tmp.<pid>), under the trace's own name, and
 * under the stats file's name. argv[1]: the trace's path, argv[2]: the victim. The runtime must
 * write neither through any of them. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) static void tick(long i) { BOOTPROF_PROBE(planted, tick, i); __asm__ volatile(""); }

int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: planted TRACE VICTIM STATS");
    char old_tmp[4096];
    const char *dot = strrchr(argv[1], '.');
    CHECK(dot != NULL, "the trace path has no extension");
    snprintf(old_tmp, sizeof old_tmp, "%.*s.tmp.%d", (int)(dot - argv[1]), argv[1], (int)getpid());
    CHECK(symlink(argv[2], old_tmp) == 0, "symlink at the old temporary name");
    CHECK(symlink(argv[2], argv[1]) == 0, "symlink at the trace's name");
    CHECK(symlink(argv[2], argv[3]) == 0, "symlink at the stats file's name");
    for (long i = 0; i < 100; i++) tick(i);
    printf("planted %s\n", old_tmp);
    return 0;
}
