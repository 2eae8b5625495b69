/* A probe hit in a signal handler, in a thread created after enabling, and in a forked child. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bootprof.h"

static atomic_long hits;
static void count(const struct bootprof_hit *h, void *c) { (void)c; if (h->args[0] == 42) atomic_fetch_add(&hits, 1); }
__attribute__((noinline)) static void where(long v) { BOOTPROF_PROBE(ctx, where, v); __asm__ volatile(""); }
static void on_usr1(int sig) { (void)sig; where(42); }
static void *thread_main(void *a) { (void)a; where(42); return NULL; }

int main(int argc, char **argv) {
    int mode = argc > 1 && argv[1][0] == 'c' ? BOOTPROF_MODE_CALL : BOOTPROF_MODE_TRAP;
    CHECK(bootprof_add_handler("ctx:*", count, NULL) >= 0, "%s", bootprof_last_error());
    CHECK(bootprof_enable_mode("ctx:where", mode) == PER_PROBE, "%s", bootprof_last_error());
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    CHECK(atomic_load(&hits) == 1, "signal handler: %ld", atomic_load(&hits));
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    CHECK(atomic_load(&hits) == 2, "new thread: %ld", atomic_load(&hits));
    pid_t pid = fork();
    if (pid == 0) {
        long before = atomic_load(&hits);
        where(42);
        _exit(atomic_load(&hits) == before + 1 ? 0 : 3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child: status %d", status);
    printf("signal handler, new thread, forked child: ok (%s mode)\n", mode == BOOTPROF_MODE_CALL ? "call" : "trap");
    return 0;
}
