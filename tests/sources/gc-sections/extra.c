extern void __dtrace_sdt_gc__kept(unsigned long);
extern void __dtrace_sdt_gc__dropped(unsigned long);
extern int __dtrace_isenabled_gc__kept(void);

long extra_squares(long n) {
    long s = 0;
    for (long i = 1; i <= n; i++) {
        if (__dtrace_isenabled_gc__kept())
            __dtrace_sdt_gc__kept((unsigned long)i);
        s += i * i;
    }
    return s;
}

/* Unused: dropped by --gc-sections along with its sites. */
void extra_unused(long v) {
    __dtrace_sdt_gc__dropped((unsigned long)v);
    __dtrace_sdt_gc__kept((unsigned long)v);
}
