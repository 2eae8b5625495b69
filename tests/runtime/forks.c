/* A process tree in one session: records 10 events, forks a child that records 20, forks another
 * that records 30 (each child exits), waits for both, and records 40 more: the parent's lane has
 * 50 records, each child's lane its own 20 or 30 (named through the parent's sites). */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <sys/wait.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) static void step(long i) { BOOTPROF_PROBE(forks, step, i); __asm__ volatile(""); }

static void child(long n) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        for (long i = 0; i < n; i++) step(i);
        exit(0);
    }
}

int main(void) {
    for (long i = 0; i < 10; i++) step(i);
    child(20);
    child(30);
    int status;
    while (wait(&status) > 0) CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    for (long i = 0; i < 40; i++) step(i);
    return 0;
}
