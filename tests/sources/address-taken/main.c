// A probe symbol whose address is taken and called through a pointer: in data with
// -DTAKE_IN_DATA (an R_X86_64_64 relocation in .data), in code with -DTAKE_IN_CODE (a GOT load in
// a PIE). Those references are not sites: a call through them reaches the probe's stub outside
// the site table, where the probe can never be turned on and costs a call while disabled, so
// bootprof-link refuses the link and names the reference (rewriter/tests/integration/badinput.rs).
// Without either, only the direct calls remain, and they are sites.
#include <stdio.h>
#include <stdlib.h>

extern void __dtrace_sdt_app__x(unsigned long, unsigned long);
extern void __dtrace_sdt_app__y(unsigned long, unsigned long);

typedef void probe_fn(unsigned long, unsigned long);

#ifdef TAKE_IN_DATA
probe_fn *volatile global_fp = __dtrace_sdt_app__y;
#endif

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
#ifdef TAKE_IN_CODE
    probe_fn *volatile fp = __dtrace_sdt_app__x;
#endif
    int calls = 0;
    for (int i = 0; i < n; i++) {
        __dtrace_sdt_app__x((unsigned long)i, 1); /* a site */
#ifdef TAKE_IN_CODE
        fp((unsigned long)i, 2); /* through the pointer: the stub, outside the table */
#endif
#ifdef TAKE_IN_DATA
        global_fp((unsigned long)i, 3);
#endif
        calls++;
    }
    printf("calls %d\n", calls);
    __dtrace_sdt_app__y(0, 0); /* a site */
    return 0;
}
