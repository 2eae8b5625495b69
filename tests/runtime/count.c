/* Hits to count (`bootprof run --count`): `count:hot`, `count:warm` and `count:cold`, hit a known
 * number of times, then the process ends the way the first argument names:
 *   threads N   4 threads at once, each hitting hot N times and warm N/2 times (hot 4N, warm 2N);
 *               then cold once, exit 0
 *   fork        hot 10 times, a fork child hot 20 times (exit 0), then hot 5 more and cold once:
 *               the parent's counts are hot 15, cold 1; the child's hot 20 (from 0)
 *   exec N M    hot N times, then exec itself as `count exit M`
 *   exit N      hot N times, cold once, exit 0
 *   kill N      hot N times, then SIGKILL: no exit handler, no signal handler runs
 *   segv N      hot N times, then a segmentation fault (the runtime's handler writes the counts)
 *   dump N M    hot N times, bootprof_dump(NULL), hot M more, then _exit(0): the counts as of the
 *               dump are the last ones written */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) void hot(long i) { BOOTPROF_PROBE(count, hot, i); __asm__ volatile(""); }
__attribute__((noinline)) void warm(long i) { BOOTPROF_PROBE(count, warm, i); __asm__ volatile(""); }
__attribute__((noinline)) void cold(void) { BOOTPROF_PROBE(count, cold); __asm__ volatile(""); }

static void hot_times(long n) {
    for (long i = 0; i < n; i++) hot(i);
}

static long per_thread;
static pthread_barrier_t start;

static void *worker(void *arg) {
    (void)arg;
    /* All four start together, so their hits of one site really are at once. */
    pthread_barrier_wait(&start);
    for (long i = 0; i < per_thread; i++) {
        hot(i);
        if (i % 2) warm(i);
    }
    return NULL;
}

static void threads(long n) {
    pthread_t t[4];
    per_thread = n;
    pthread_barrier_init(&start, NULL, 4);
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0, "pthread_create");
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

int main(int argc, char **argv) {
    CHECK(argc >= 2, "usage: count HOW [N [M]]");
    const char *how = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 1000;
    long m = argc > 3 ? atol(argv[3]) : 10;
    if (!strcmp(how, "threads")) {
        threads(n);
    } else if (!strcmp(how, "fork")) {
        hot_times(10);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            hot_times(20);
            exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
        hot_times(5);
    } else if (!strcmp(how, "exec")) {
        hot_times(n);
        char *args[] = {argv[0], "exit", argv[3], NULL};
        execv("/proc/self/exe", args);
        CHECK(0, "exec failed");
    } else if (!strcmp(how, "exit")) {
        hot_times(n);
    } else if (!strcmp(how, "kill")) {
        hot_times(n);
        raise(SIGKILL);
    } else if (!strcmp(how, "segv")) {
        hot_times(n);
        *(volatile int *)16 = 1;
    } else if (!strcmp(how, "dump")) {
        hot_times(n);
        CHECK(bootprof_dump(NULL) == 0, "bootprof_dump: %s", bootprof_last_error());
        hot_times(m);
        _exit(0);
    } else {
        CHECK(0, "unknown ending %s", how);
    }
    cold();
    return 0;
}
