/* Many records from several processes and threads: the process forks once, and parent and child
 * each run two threads that call step() N times (N the first argument); step() calls leaf()
 * twice. Built with -finstrument-functions, each step is 6 records: 24 N in all, plus main's. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;
static long n;

__attribute__((noinline)) static void leaf(long i) { sink += i; }
__attribute__((noinline)) static void step(long i) {
    leaf(i);
    leaf(i + 1);
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) step(i);
    return NULL;
}

static void two_threads(void) {
    pthread_t t[2];
    for (int k = 0; k < 2; k++) CHECK(pthread_create(&t[k], NULL, worker, NULL) == 0, "pthread_create");
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
}

int main(int argc, char **argv) {
    CHECK(argc == 2, "usage: many N");
    n = atol(argv[1]);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    two_threads();
    if (child == 0) return 0;
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child failed");
    return 0;
}
