// `-fno-plt`: calls to external functions go through the GOT, `ff 15` + R_X86_64_GOTPCRELX (and a
// tail call is `ff 25`, a jump through the GOT).
//#Objects: main.c
//#Compile: -fno-plt
//#Args: 3
//#ExpectStdout: tick 0 tick 1 tick 2
//#ExpectKinds: probe is-enabled
//#ExpectForm: O0 call-got
//#ExpectForm: O2 jmp-got
#include <stdio.h>
#include <stdlib.h>

extern void __dtrace_sdt_noplt__tick(unsigned long);
extern void __dtrace_sdt_noplt__last(unsigned long, unsigned long);
extern int __dtrace_isenabled_noplt__tick(void);

void tick(int i) {
    printf("%stick %d", i ? " " : "", i);
    if (__dtrace_isenabled_noplt__tick())
        __dtrace_sdt_noplt__tick((unsigned long)i);
}

/* Tail call through the GOT at -O2. */
void last(int a, int b) { __dtrace_sdt_noplt__last((unsigned long)a, (unsigned long)b); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1;
    for (int i = 0; i < n; i++)
        tick(i);
    printf("\n");
    last(n, 0);
    return 0;
}
