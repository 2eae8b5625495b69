// A shared library with probes (`-shared -fPIC`, linked through bootprof-link too, with its own
// table and stubs), loaded by a program that has probes of its own. No -static variant.
//#Objects: main.c
//#Shared: libcounter.so counter.c
//#Skip: static
//#Args: x yy zzz
//#ExpectStdout: counted 3 args, 6 chars, checksum 3786
//#ExpectKinds: probe is-enabled
#include <stdio.h>
#include <string.h>

extern void __dtrace_sdt_app__begin(unsigned long);
extern void __dtrace_sdt_app__end(unsigned long, unsigned long);

void counter_add(const char *s);
unsigned long counter_chars(void);
unsigned long counter_items(void);
unsigned long counter_checksum(void);

int main(int argc, char **argv) {
    __dtrace_sdt_app__begin((unsigned long)argc);
    for (int i = 1; i < argc; i++)
        counter_add(argv[i]);
    printf("counted %lu args, %lu chars, checksum %lu\n", counter_items(), counter_chars(),
           counter_checksum());
    __dtrace_sdt_app__end(counter_items(), counter_chars());
    return 0;
}
