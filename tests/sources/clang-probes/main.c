// The same kind of program compiled and linked with clang, whose code generation differs from
// gcc's (block placement, tail calls).
//#Driver: clang
//#Objects: main.c
//#Args: one two three
//#ExpectStdout: 3 args, 11 bytes
//#ExpectKinds: probe is-enabled
//#ExpectForm: O2 jmp
#include <stdio.h>
#include <string.h>

extern void __dtrace_sdt_clang__arg(unsigned long, unsigned long);
extern void __dtrace_sdt_clang__done(unsigned long);
extern int __dtrace_isenabled_clang__arg(void);

/* Tail call at -O2. */
void done(unsigned long total) { __dtrace_sdt_clang__done(total); }

int main(int argc, char **argv) {
    unsigned long total = 0;
    for (int i = 1; i < argc; i++) {
        if (__dtrace_isenabled_clang__arg())
            __dtrace_sdt_clang__arg((unsigned long)i, strlen(argv[i]));
        total += strlen(argv[i]);
    }
    printf("%d args, %lu bytes\n", argc - 1, total);
    done(total);
    return 0;
}
