// Not a corpus case: the object that rewriter/tests/integration/badinput.rs compiles and then
// damages in copies (ELF class, machine, truncation, section headers, relocations, site bytes).
// It holds one `e8` call with R_X86_64_PLT32 against each probe symbol below.
#include <stdio.h>

extern void __dtrace_sdt_bad__first(unsigned long);
extern void __dtrace_sdt_bad__second(unsigned long, unsigned long);

int main(int argc, char **argv) {
    (void)argv;
    __dtrace_sdt_bad__first((unsigned long)argc);
    printf("hello\n");
    __dtrace_sdt_bad__second((unsigned long)argc, 2);
    return 0;
}
