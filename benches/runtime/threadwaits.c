/* Times two system calls the runtime makes, in a process of one thread and in one with a second,
 * idle thread: the registration for membarrier's core serialization (the runtime's first enable
 * of a site) and the descriptor table's growth to 1,024 entries (the recorder's F_DUPFD to 960,
 * which puts the lane's descriptors out of the program's way). With a second thread sharing the
 * address space and the descriptor table, each waits for an RCU grace period. One line a run, in
 * microseconds:
 *
 *   threadwaits           one thread
 *   threadwaits thread    a second thread, started first and idle
 *
 * Build: cc -O2 -pthread -o threadwaits benches/runtime/threadwaits.c. Run each way several
 * times, in turn. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, as the runtime registers. */
#define REGISTER_SYNC_CORE (1 << 6)

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *idle(void *unused) {
    (void)unused;
    pause();
    return NULL;
}

int main(int argc, char **argv) {
    int threaded = argc > 1 && !strcmp(argv[1], "thread");
    pthread_t other;
    if (threaded && pthread_create(&other, NULL, idle, NULL) != 0) return 2;
    double t0 = now_us();
    long registered = syscall(SYS_membarrier, REGISTER_SYNC_CORE, 0, 0);
    double t1 = now_us();
    int fd = open("/", O_PATH | O_CLOEXEC);
    int high = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 960);
    double t2 = now_us();
    if (registered != 0 || high < 0) return 2;
    printf("%s: membarrier registration %.0f us, descriptor table grown %.0f us\n",
           threaded ? "two threads" : "one thread", t1 - t0, t2 - t1);
    return 0;
}
