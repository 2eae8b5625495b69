/* Function exits by return hooking (bootprof run --graph), where return addresses matter. Built
 * -O2 -pg -mfentry; each scenario (argv[1]) prints what it computed, which must be the same with
 * and without bootprof, and the test checks the trace's ENTER/EXIT lines exactly:
 *   jump      longjmp out of hooked frames, and siglongjmp out of a hooked signal handler
 *   signal    a signal handler that runs hooked code while hooked frames are live
 *   threads   threads, each with its own hooked frames
 *   fork      a child forked inside hooked frames returns through them, as the parent does
 *   deep      recursion deeper than the shadow stack
 *   tails     a hooked function that tail-calls another (a sibling call at -O2)
 *   disable   the sites disabled, and graph tracing turned off, while another thread's hooked
 *             frames are live
 *   backtrace glibc backtrace() inside hooked frames sees the real callers */
#include <execinfo.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootprof.h"

#define NOINLINE __attribute__((noinline))
/* Keeps a call from being a sibling call (the scenarios other than `tails` want real frames). */
#define KEEP(x) __asm__ volatile("" : "+r"(x))

static jmp_buf jump_to;
static sigjmp_buf sig_jump_to;
static volatile long sink;

NOINLINE long j_deep(long x) {
    if (x > 0) longjmp(jump_to, (int)x);
    return x;
}
NOINLINE long j_mid(long x) {
    long r = j_deep(x + 1);
    KEEP(r);
    return r + 1;
}
NOINLINE long j_after(long x) {
    KEEP(x);
    return x * 10;
}
NOINLINE long j_outer(long x) {
    int got = setjmp(jump_to);
    if (got == 0) return j_mid(x);
    long r = j_after(got);
    KEEP(r);
    return r;
}
NOINLINE void s_work(int sig) {
    sink += sig;
}
NOINLINE void s_handler(int sig) {
    s_work(sig);
    siglongjmp(sig_jump_to, 7);
}
NOINLINE long s_deep(long x) {
    raise(SIGUSR1);
    return x;
}
NOINLINE long s_outer(long x) {
    signal(SIGUSR1, s_handler);
    int got = sigsetjmp(sig_jump_to, 1);
    if (got == 0) return s_deep(x);
    long r = j_after(got);
    KEEP(r);
    return r;
}

/* A handler that returns: its hooked frames end before the interrupted ones do. */
NOINLINE void h_work(int sig) {
    sink += sig;
}
NOINLINE void h_handler(int sig) {
    h_work(sig);
}
NOINLINE long h_inner(long x) {
    raise(SIGUSR2);
    KEEP(x);
    return x + 1;
}
NOINLINE long h_outer(long x) {
    long r = h_inner(x);
    KEEP(r);
    return r * 2;
}

NOINLINE long r_down(long n) {
    if (n == 0) return 0;
    long r = r_down(n - 1);
    KEEP(r);
    return r + n;
}
NOINLINE void *t_main(void *arg) {
    long n = (long)arg;
    return (void *)r_down(n);
}

NOINLINE long f_child(long x) {
    KEEP(x);
    return x + 100;
}
NOINLINE long f_fork(long x) {
    fflush(stdout);
    pid_t pid = fork();
    long r = pid == 0 ? f_child(x) : x;
    KEEP(r);
    if (pid == 0) {
        printf("child %ld\n", r);
        fflush(stdout);
        return r;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("child exited %d\n", WEXITSTATUS(status));
    return r;
}

NOINLINE long t_c(long x) {
    return x * 3;
}
NOINLINE long t_b(long x) {
    return t_c(x + 2);
}
NOINLINE long t_a(long x) {
    return t_b(x + 1);
}

static volatile int parked, release;
NOINLINE long w_spin(long x) {
    parked = 1;
    while (!release) sched_yield();
    KEEP(x);
    return x + 1;
}
NOINLINE void *w_main(void *arg) {
    long r = w_spin((long)arg);
    KEEP(r);
    return (void *)(r + 1);
}

NOINLINE int bt_b(void **frames) {
    int n = backtrace(frames, 8);
    KEEP(n);
    return n;
}
NOINLINE int bt_a(void **frames) {
    int n = bt_b(frames);
    KEEP(n);
    return n;
}

/* Whether `a` is in the function starting at `f` (its first 4 KiB). */
static int within(void *a, void *f) {
    return (uintptr_t)a > (uintptr_t)f && (uintptr_t)a < (uintptr_t)f + 4096;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "jump") == 0) {
        printf("jump %ld\n", j_outer(4));
        printf("siglongjmp %ld\n", s_outer(1));
    } else if (strcmp(what, "signal") == 0) {
        signal(SIGUSR2, h_handler);
        printf("signal %ld %ld\n", h_outer(20), sink);
    } else if (strcmp(what, "threads") == 0) {
        pthread_t t[4];
        for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, t_main, (void *)(i + 3));
        for (int i = 0; i < 4; i++) {
            void *r;
            pthread_join(t[i], &r);
            printf("thread %d %ld\n", i, (long)r);
        }
    } else if (strcmp(what, "fork") == 0) {
        long r = f_fork(5);
        printf("fork %ld\n", r);
    } else if (strcmp(what, "deep") == 0) {
        printf("deep %ld\n", r_down(300));
    } else if (strcmp(what, "tails") == 0) {
        printf("tails %ld\n", t_a(1));
    } else if (strcmp(what, "disable") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, w_main, (void *)41);
        while (!parked) sched_yield();
        int off = bootprof_disable("*");
        bootprof_set_graph(0);
        release = 1;
        void *r;
        pthread_join(t, &r);
        fprintf(stderr, "sites disabled: %d\n", off);
        printf("disable %ld\n", (long)r);
        printf("after %ld\n", r_down(2));
    } else if (strcmp(what, "backtrace") == 0) {
        void *frames[8];
        int n = bt_a(frames);
        printf("backtrace %d frames: bt_b %d, bt_a %d, main %d\n", n >= 4, within(frames[0], bt_b),
               within(frames[1], bt_a), within(frames[2], main));
    } else {
        fprintf(stderr, "usage: graph jump|signal|threads|fork|deep|tails|disable|backtrace\n");
        return 2;
    }
    return 0;
}
