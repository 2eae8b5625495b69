#include <stdio.h>

extern void __dtrace_sdt_stats__add(unsigned long, unsigned long);
extern void __dtrace_sdt_stats__report(unsigned long, unsigned long, unsigned long,
                                       unsigned long, unsigned long, unsigned long);
extern int __dtrace_isenabled_stats__add(void);

static unsigned long total, count;

/* Tail position at -O2. */
void stats_add(unsigned long v) {
    total += v;
    count++;
    __dtrace_sdt_stats__add(v, total);
}

unsigned long stats_total(void) { return total; }
unsigned long stats_count(void) { return count; }

/* An is-enabled test in tail position: its result is ours. */
int stats_tracing(void) { return __dtrace_isenabled_stats__add(); }

/* Six arguments, the most a probe takes; tail position at -O2. */
void report(const char *label, unsigned long v) {
    printf("%s %lu\n", label, v % 100000);
    __dtrace_sdt_stats__report(1, 2, 3, 4, (unsigned long)label, v);
}
