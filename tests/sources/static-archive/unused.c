/* Archive member with probes that nothing refers to: the link must not pull it in. */
extern void __dtrace_sdt_parts__unused(unsigned long);
extern int __dtrace_isenabled_parts__unused(void);

long archive_unused_helper(long v) {
    __dtrace_sdt_parts__unused((unsigned long)v);
    return v * 3;
}

long archive_unused_function(long v) {
    if (__dtrace_isenabled_parts__unused())
        v++;
    return archive_unused_helper(v) + 1;
}
