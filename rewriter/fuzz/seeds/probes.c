/* Named probes and is-enabled tests, as a DTrace-style provider "app" would emit them. */
extern void __dtrace_sdt_app__start(unsigned long);
extern void __dtrace_sdt_app__done(unsigned long, unsigned long);
extern int __dtrace_isenabled_app__start(void);
extern int __dtrace_isenabled_app__done(void);

static unsigned long counter;

unsigned long work(unsigned long n)
{
    if (__dtrace_isenabled_app__start())
        __dtrace_sdt_app__start(n);
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        acc += i * 3 + counter;
    if (__dtrace_isenabled_app__done())
        __dtrace_sdt_app__done(n, acc);
    return acc;
}

/* A tail call to a probe: compiled as a jmp, which is not a plain call site. */
void tail(unsigned long x)
{
    __dtrace_sdt_app__start(x);
}

/* The address of a probe taken: a relocation that is not a call. */
void (*probe_ptr)(unsigned long) = __dtrace_sdt_app__start;

int main(void)
{
    counter = 1;
    tail(work(10));
    return 0;
}
