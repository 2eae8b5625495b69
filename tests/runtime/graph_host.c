/* A host carrying the runtime, built -pg -mfentry, whose hooked frames a shared library
 * (graph_lib.c, loaded with dlopen from argv[1]: nothing of it on the host's link line, so the
 * host exports nothing) longjmps across: h_outer sets the jump and calls h_mid, which calls the
 * library's lib_mid, which jumps back from lib_deep over all three; then h_after runs. Prints
 * the values computed (the same with and without bootprof). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

static long (*lib_mid)(jmp_buf *to, long x);

static jmp_buf jump_to;

NOINLINE long h_after(long x) {
    KEEP(x);
    return x * 10;
}

NOINLINE long h_mid(long x) {
    long r = lib_mid(&jump_to, x + 1);
    KEEP(r);
    return r + 1;
}

NOINLINE long h_outer(long x) {
    int got = setjmp(jump_to);
    if (got == 0) return h_mid(x);
    long r = h_after(got);
    KEEP(r);
    return r;
}

int main(int argc, char **argv) {
    void *lib = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib || !(lib_mid = (long (*)(jmp_buf *, long))dlsym(lib, "lib_mid"))) {
        fprintf(stderr, "FAILED: %s\n", dlerror());
        return 1;
    }
    long sum = 0;
    for (long i = 1; i <= 3; i++) sum += h_outer(i);
    printf("longjmp across a library %ld\n", sum);
    return 0;
}
