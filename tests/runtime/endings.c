/* Records exactly N events (`endings:tick`, N from the second argument, default 1000), then ends
 * the way the first argument names, so a session's reader can be checked against every ending:
 *   exit N | thread-exit | _exit | abort | segv | bus | ill | fpe | kill | exec-self | exec-other
 *   | hang (prints "ready" and sleeps until killed) | oom (allocates until the OOM killer ends it)
 * `exec-self` execs this program again as `endings exit 0 M` (M = the third argument, default
 * 10): a new lane of the same pid. `exec-other` execs /bin/true, which carries no runtime. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include "bootprof.h"

__attribute__((noinline)) static void tick(long i) { BOOTPROF_PROBE(endings, tick, i); __asm__ volatile(""); }

static void *exit_from_thread(void *arg) {
    (void)arg;
    exit(4);
}

int main(int argc, char **argv) {
    CHECK(argc >= 2, "usage: endings HOW [N [M]]");
    const char *how = argv[1];
    long n = argc > 2 ? atol(argv[2]) : 1000;
    for (long i = 0; i < n; i++) tick(i);
    if (!strcmp(how, "exit")) exit(argc > 3 ? atoi(argv[3]) : 3);
    if (!strcmp(how, "thread-exit")) {
        pthread_t t;
        pthread_create(&t, NULL, exit_from_thread, NULL);
        for (;;) pause();
    }
    if (!strcmp(how, "_exit")) _exit(5);
    if (!strcmp(how, "abort")) abort();
    if (!strcmp(how, "segv")) *(volatile int *)16 = 1;
    if (!strcmp(how, "bus")) {
        /* A mapping of an empty file: touching it is past the end of the file. */
        char path[] = "/tmp/endings-bus-XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "mkstemp");
        unlink(path);
        volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        CHECK(p != MAP_FAILED, "mmap");
        p[0] = 1;
    }
    if (!strcmp(how, "ill")) __builtin_trap();
    if (!strcmp(how, "fpe")) {
        volatile int zero = 0;
        printf("%d\n", 100 / zero);
    }
    if (!strcmp(how, "kill")) raise(SIGKILL);
    if (!strcmp(how, "exec-self")) {
        char *args[] = {argv[0], "exit", argc > 3 ? argv[3] : "10", "0", NULL};
        execv("/proc/self/exe", args);
        CHECK(0, "exec failed");
    }
    if (!strcmp(how, "exec-other")) {
        execl("/bin/true", "true", (char *)NULL);
        CHECK(0, "exec failed");
    }
    if (!strcmp(how, "oom")) {
        for (;;) {
            char *p = malloc(1 << 20);
            CHECK(p != NULL, "malloc");
            memset(p, 1, 1 << 20);
        }
    }
    if (!strcmp(how, "hang")) {
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    CHECK(0, "unknown ending %s", how);
    return 1;
}
