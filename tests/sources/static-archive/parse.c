/* Archive member with probes, pulled in by main. */
extern void __dtrace_sdt_parts__number(unsigned long);
extern int __dtrace_isenabled_parts__number(void);

int parse_numbers(const char *s, long *out, int max) {
    int n = 0;
    long cur = 0;
    int in = 0;
    for (;; s++) {
        if (*s >= '0' && *s <= '9') {
            cur = cur * 10 + (*s - '0');
            in = 1;
        } else {
            if (in && n < max) {
                if (__dtrace_isenabled_parts__number())
                    __dtrace_sdt_parts__number((unsigned long)cur);
                out[n++] = cur;
            }
            cur = 0;
            in = 0;
            if (!*s)
                break;
        }
    }
    return n;
}
