extern void __dtrace_sdt_util__char(unsigned long, unsigned long);
extern void __dtrace_sdt_util__fold(unsigned long, unsigned long, unsigned long);
extern int __dtrace_isenabled_util__char(void);

unsigned long checksum(const char *s) {
    unsigned long h = 5381;
    for (; *s; s++) {
        if (__dtrace_isenabled_util__char())
            __dtrace_sdt_util__char((unsigned long)s, (unsigned long)*s);
        h = h * 33 + (unsigned char)*s;
    }
    return h;
}

/* The probe is the last call: a tail `jmp` at -O2. */
void note_fold(unsigned long a, unsigned long b) {
    __dtrace_sdt_util__fold(a, b, a ^ b);
}

unsigned long fold(unsigned long acc, unsigned long v) {
    unsigned long r = (acc << 5) ^ (acc >> 3) ^ v;
    note_fold(acc, r);
    return r;
}
