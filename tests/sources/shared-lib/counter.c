/* The shared library: the same provider as the program (its stubs are its own, hidden). */
extern void __dtrace_sdt_app__begin(unsigned long);
extern void __dtrace_sdt_lib__add(unsigned long, unsigned long);
extern int __dtrace_isenabled_lib__add(void);

static unsigned long items, chars, sum;

void counter_add(const char *s) {
    __dtrace_sdt_app__begin(0);
    for (; *s; s++) {
        chars++;
        sum = sum * 3 + (unsigned char)*s;
        if (__dtrace_isenabled_lib__add())
            __dtrace_sdt_lib__add(chars, sum);
    }
    items++;
    __dtrace_sdt_lib__add(items, sum);
}

unsigned long counter_chars(void) { return chars; }
unsigned long counter_items(void) { return items; }
unsigned long counter_checksum(void) { return sum % 10007; }
