/* Records N events (`grow:tick`, argument i, N from the first argument), then looks at its own
 * lane (BOOTPROF_SESSION/<pid>.0.lane) for up to WAIT milliseconds (the second argument) and
 * prints "ahead" as soon as the file is longer than the chunks the runtime grew it to (the
 * header's GROWN word): `bootprof run` made its pages ahead of it. Else "not ahead".
 *
 * With a third argument GO (a path): then forks a child that records N events of its own,
 * waits until its lane is ahead too (printing "child ahead"), and tells its parent, which
 * exits: the child outlives the run. It waits for the file GO to exist (the test makes it
 * once `bootprof run` has ended), then writes to GO.result "kept" if its lane still runs
 * ahead (nothing cut it under a process that still writes it), else "cut", and records N more
 * events. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "bootprof.h"

/* Header fields of a lane (bootprof_format::lane::field): GROWN, and the size of the header and
 * of a chunk. */
#define GROWN 120
#define BLOCK 4096

__attribute__((noinline)) static void tick(long i) { BOOTPROF_PROBE(grow, tick, i); __asm__ volatile(""); }

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&t, NULL);
}

/* Whether this process's lane is longer than the chunks it grew, within `wait_ms`. */
static int ahead(long wait_ms) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.0.lane", getenv("BOOTPROF_SESSION"), (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "open %s", path);
    int is = 0;
    for (long waited = 0;; waited += 10) {
        unsigned long long grown = 0;
        struct stat st;
        CHECK(pread(fd, &grown, 8, GROWN) == 8 && fstat(fd, &st) == 0, "%s", path);
        is = (unsigned long long)st.st_size > BLOCK + grown * BLOCK;
        if (is || waited >= wait_ms) break;
        sleep_ms(10);
    }
    close(fd);
    return is;
}

int main(int argc, char **argv) {
    CHECK(argc >= 3, "usage: grow N WAIT [GO]");
    long n = atol(argv[1]), wait_ms = atol(argv[2]);
    for (long i = 0; i < n; i++) tick(i);
    printf("%s\n", ahead(wait_ms) ? "ahead" : "not ahead");
    fflush(stdout);
    if (argc < 4) return 0;
    int ready[2];
    CHECK(pipe(ready) == 0, "pipe");
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child > 0) {
        char c;
        CHECK(read(ready[0], &c, 1) == 1, "the child did not say it was ready");
        return 0;
    }
    for (long i = 0; i < n; i++) tick(n + i);
    printf("child %s\n", ahead(wait_ms) ? "ahead" : "not ahead");
    fflush(stdout);
    CHECK(write(ready[1], "r", 1) == 1, "write");
    const char *go = argv[3];
    for (int i = 0; access(go, F_OK) != 0; i++) {
        CHECK(i < 3000, "%s never appeared", go);
        sleep_ms(10);
    }
    char result[4096], partial[4096];
    snprintf(result, sizeof result, "%s.result", go);
    snprintf(partial, sizeof partial, "%s.partial", go);
    FILE *f = fopen(partial, "w");
    CHECK(f, "%s", partial);
    fprintf(f, "%s\n", ahead(0) ? "kept" : "cut");
    CHECK(fclose(f) == 0 && rename(partial, result) == 0, "%s", result);
    for (long i = 0; i < n; i++) tick(2 * n + i);
    return 0;
}
