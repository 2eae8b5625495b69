/* Odd shapes: a probe called through a pointer, a probe with no arguments in a loop,
 * thread-local data and a large stack frame. */
extern void __dtrace_sdt_odd__loop(void);
extern void __dtrace_sdt_odd__big(char *);

static __thread int tls_counter;

void spin(int n)
{
    for (int i = 0; i < n; i++) {
        __dtrace_sdt_odd__loop();
        tls_counter++;
    }
}

void big(void)
{
    char buf[8192];
    for (int i = 0; i < (int)sizeof buf; i++)
        buf[i] = (char)i;
    __dtrace_sdt_odd__big(buf);
}

void through_pointer(void (*volatile *p)(void))
{
    *p = __dtrace_sdt_odd__loop;
    (*p)();
}
