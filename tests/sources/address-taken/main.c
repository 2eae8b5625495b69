// A probe symbol whose address is taken (in data and in code) and called through a pointer. Those
// relocations are not sites: they are left alone, the symbol stays defined (by the stub), and the
// program behaves the same. The direct calls are sites as usual.
//#Args: 4
//#ExpectStdout: same 1 1
//#ExpectStdout: calls 4
//#ExpectKinds: probe
#include <stdio.h>
#include <stdlib.h>

extern void __dtrace_sdt_app__x(unsigned long, unsigned long);
extern void __dtrace_sdt_app__y(unsigned long, unsigned long);

typedef void probe_fn(unsigned long, unsigned long);

/* Address taken in data: an R_X86_64_64 relocation in .data. */
probe_fn *volatile global_fp = __dtrace_sdt_app__y;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    /* Address taken in code: a GOT load in a PIE, an absolute relocation without -fpie. */
    probe_fn *volatile fp = __dtrace_sdt_app__x;
    int calls = 0;
    for (int i = 0; i < n; i++) {
        __dtrace_sdt_app__x((unsigned long)i, 1); /* a site */
        fp((unsigned long)i, 2);                   /* through the pointer: runs the stub */
        global_fp((unsigned long)i, 3);
        calls++;
    }
    printf("same %d %d\n", fp == __dtrace_sdt_app__x, global_fp == __dtrace_sdt_app__y);
    printf("calls %d\n", calls);
    __dtrace_sdt_app__y(0, 0); /* a site */
    return 0;
}
