// Named probes and is-enabled tests in several functions across three translation units; at -O2
// some probes sit in tail position, so the compiler emits `jmp` (and one is-enabled test is a tail
// call whose result is the function's result).
//#Objects: main.c util.c stats.c
//#Args: alpha beta gamma delta
//#ExpectStdout: alpha 90763
//#ExpectStdout: beta 76641
//#ExpectStdout: gamma 7880
//#ExpectStdout: delta 93007
//#ExpectStdout: words 4 total 2291
//#ExpectExit: 6
//#ExpectKinds: probe is-enabled
//#ExpectForm: O2 jmp
#include <stdio.h>

extern void __dtrace_sdt_app__start(unsigned long, unsigned long);
extern void __dtrace_sdt_app__arg(unsigned long, unsigned long);
extern void __dtrace_sdt_app__done(unsigned long);
extern int __dtrace_isenabled_app__arg(void);

unsigned long checksum(const char *s);
unsigned long fold(unsigned long acc, unsigned long v);
void report(const char *label, unsigned long v);
void stats_add(unsigned long v);
unsigned long stats_count(void);
unsigned long stats_total(void);
int stats_tracing(void);

int main(int argc, char **argv) {
    __dtrace_sdt_app__start((unsigned long)argc, (unsigned long)argv);
    unsigned long acc = 0;
    for (int i = 1; i < argc; i++) {
        if (__dtrace_isenabled_app__arg())
            __dtrace_sdt_app__arg((unsigned long)i, (unsigned long)argv[i]);
        unsigned long c = checksum(argv[i]);
        stats_add(c % 1000);
        acc = fold(acc, c);
        report(argv[i], c);
    }
    if (stats_tracing())
        printf("tracing is on\n");
    printf("words %lu total %lu\n", stats_count(), stats_total());
    __dtrace_sdt_app__done(acc);
    return (int)(acc % 7);
}
