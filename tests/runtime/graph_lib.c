/* A shared library linked by bootprof-link (so it carries the runtime), built -pg -mfentry for
 * graph_host.c: lib_mid calls lib_deep, which longjmps out of both (hooked) frames to the
 * host's setjmp. Its longjmp goes to its own copy of the runtime's wrapper (the host exports
 * none), which must hand it on to the copy that serves (the host's, found by its note), whose
 * shadow stack holds the hooked frames. */
#include <setjmp.h>

#define NOINLINE __attribute__((noinline))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

NOINLINE long lib_deep(jmp_buf *to, long x) {
    if (x > 0) longjmp(*to, (int)x);
    return x;
}

NOINLINE long lib_mid(jmp_buf *to, long x) {
    long r = lib_deep(to, x + 1);
    KEEP(r);
    return r + 1;
}
