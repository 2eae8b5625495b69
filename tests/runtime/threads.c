/* Two threads, a wait blamed on the other's hold, and a forked child, for the reports that show
 * threads and processes side by side (`--format perfetto`):
 *   main (BOOTPROF_THREAD(main)) forks a child that runs build(1) (nested regions, an event)
 *   and exits 0;
 *   main starts a thread "loader" that takes the table's lock, holds it (bphold:table) while it
 *   runs build(3) -> fill -> fill_row x3, with events, for about 30 ms, and releases it;
 *   main, once the loader holds the lock, waits for it (bpwait:table ... bpunwait:table) inside
 *   use_table: that wait is blamed on the loader, whose stack is shown over it;
 *   main then runs build(3) and joins the loader and the child. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bootprof.h"

static void sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&t, &t) != 0) {}
}

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int held;

__attribute__((noinline)) static void fill_row(long row) {
    BOOTPROF_ENTER();
    BOOTPROF_PROBE(app, row, row);
    sleep_us(10000);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void fill(long rows) {
    BOOTPROF_ENTER();
    for (long r = 0; r < rows; r++) fill_row(r);
    BOOTPROF_EXIT();
}

__attribute__((noinline)) static void build(long rows) {
    BOOTPROF_ENTER();
    BOOTPROF_EVENT(build_start);
    fill(rows);
    BOOTPROF_EXIT();
}

static void *loader(void *arg) {
    (void)arg;
    BOOTPROF_THREAD(loader);
    pthread_mutex_lock(&table_lock);
    BOOTPROF_HOLD(table);
    atomic_store(&held, 1);
    build(3);
    BOOTPROF_RELEASE(table);
    pthread_mutex_unlock(&table_lock);
    return NULL;
}

__attribute__((noinline)) static void use_table(void) {
    BOOTPROF_ENTER();
    BOOTPROF_WAIT(table);
    pthread_mutex_lock(&table_lock);
    BOOTPROF_UNWAIT(table);
    pthread_mutex_unlock(&table_lock);
    BOOTPROF_EXIT();
}

int main(void) {
    BOOTPROF_THREAD(main);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        build(1);
        exit(0);
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, loader, NULL) == 0, "pthread_create");
    while (!atomic_load(&held)) sleep_us(100);
    use_table();
    build(2);
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child failed");
    return 0;
}
