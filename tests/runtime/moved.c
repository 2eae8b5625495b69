/* Code large enough to be moved whole when every site is enabled while the process has one
 * thread: the runs of pages are copied into anonymous memory and put in place of the file's pages.
 * Checks the results and hits in call mode, which of the code /proc/self/maps still names by the
 * executable's file, and that disabling gives back the file's bytes.
 *
 *   moved [fresh|written|thread|started]
 *
 * fresh: as the program starts; written: one code page written first (as a debugger's breakpoint
 * or a uprobe writes one), whose run must stay the file's; thread: another thread runs, so
 * nothing may be moved; started: every site was enabled in call mode from the environment as the
 * program started (BOOTPROF_ENABLE='*' BOOTPROF_MODE=call): checks the results and hits, then
 * that disabling gives back the file's bytes, and prints whether the code's middle was moved.
 * The functions and their table come from moved_funcs.h, which the test generates (FUNCS
 * functions f0.., each large and aligned enough to fill pages). */
#include "check.h"
#include "bootprof.h"
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include "moved_funcs.h"

static long hits;
static void count(const struct bootprof_hit *h, void *c) {
    (void)h;
    (void)c;
    hits++;
}

static long run_all(void) {
    long s = 0;
    for (long i = 0; i < FUNCS; i++) s += table[i](i);
    return s;
}

/* Bytes of executable mappings /proc/self/maps names by this program's file; *holds tells
 * whether one of them holds `addr`. */
static long named_code(const void *addr, int *holds) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "readlink");
    exe[n] = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f, "maps");
    char line[8192];
    long total = 0;
    *holds = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[2] != 'x') continue;
        char *path = strchr(line, '/');
        if (!path) continue;
        path[strcspn(path, "\n")] = 0;
        if (strcmp(path, exe)) continue;
        total += (long)(hi - lo);
        *holds |= (unsigned long)addr >= lo && (unsigned long)addr < hi;
    }
    fclose(f);
    return total;
}

/* Writes the byte at `addr` back to itself through /proc/self/mem: the kernel makes the page a
 * private copy, as it does for a debugger's breakpoint. */
static void touch_code(const void *addr) {
    int fd = open("/proc/self/mem", O_RDWR);
    CHECK(fd >= 0, "open /proc/self/mem");
    unsigned char b;
    CHECK(pread(fd, &b, 1, (off_t)(unsigned long)addr) == 1, "read code");
    CHECK(pwrite(fd, &b, 1, (off_t)(unsigned long)addr) == 1, "write code");
    close(fd);
}

static void *idle(void *fd) {
    char c;
    return (void *)(long)read(*(int *)fd, &c, 1);
}

/* What run_all computes, without calling the functions. */
static long expected(void) {
    long s = 0;
    for (long i = 0; i < FUNCS; i++) s += i * (i % 7 + 2) + i;
    return s;
}

int main(int argc, char **argv) {
    const char *how = argc > 1 ? argv[1] : "fresh";
    long want = run_all();
    CHECK(want == expected(), "results differ from the functions' own");
    const void *mid = (const void *)table[FUNCS / 2];
    int holds;
    long before = named_code(mid, &holds);
    if (!strcmp(how, "started")) {
        CHECK(bootprof_add_handler("f*", count, 0) >= 0, "handler");
        CHECK(run_all() == want, "results changed");
        CHECK(hits == FUNCS, "%ld hits", hits);
        CHECK(bootprof_disable("*") >= FUNCS, "disable");
        struct text_cmp t = text_vs_file();
        CHECK(t.differing == 0, "%ld bytes differ after disable", t.differing);
        printf("started: middle %s\n", holds ? "named" : "moved");
        return 0;
    }
    CHECK(holds, "the code's middle is not in a mapping of the file");
    if (!strcmp(how, "written")) touch_code(mid);
    int fds[2];
    pthread_t other;
    if (!strcmp(how, "thread")) {
        CHECK(pipe(fds) == 0, "pipe");
        CHECK(pthread_create(&other, 0, idle, &fds[0]) == 0, "pthread_create");
    }
    CHECK(bootprof_add_handler("f*", count, 0) >= 0, "handler");
    for (int round = 1; round <= 2; round++) {
        int n = bootprof_enable_mode("f*", BOOTPROF_MODE_CALL);
        CHECK(n == FUNCS, "round %d: enabled %d sites", round, n);
        long after = named_code(mid, &holds);
        hits = 0;
        CHECK(run_all() == want, "round %d: results changed when enabled", round);
        CHECK(hits == FUNCS, "round %d: %ld hits", round, hits);
        CHECK(bootprof_disable("*") == n, "disable");
        struct text_cmp t = text_vs_file();
        CHECK(t.differing == 0, "round %d: %ld bytes differ after disable", round, t.differing);
        printf("round %d: moved %ld of %ld bytes, middle %s\n", round, before - after, before,
               holds ? "named" : "moved");
        before = after;
    }
    CHECK(run_all() == want, "results changed after disable");
    if (!strcmp(how, "thread")) {
        CHECK(write(fds[1], "x", 1) == 1, "write");
        pthread_join(other, 0);
    }
    return 0;
}
