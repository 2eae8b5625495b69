/* Many small functions, one text section each with -ffunction-sections, plus a
 * function in a named section and one in .text.unlikely. */
extern void __dtrace_sdt_sec__a(void);
extern void __dtrace_sdt_sec__b(int, int, int, int, int, int);
extern int __dtrace_isenabled_sec__b(void);

#define F(n) int f##n(int x) { __dtrace_sdt_sec__a(); return x + n; }
F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)

__attribute__((section(".text.custom"))) int custom(int x)
{
    if (__dtrace_isenabled_sec__b())
        __dtrace_sdt_sec__b(x, 1, 2, 3, 4, 5);
    return x;
}

__attribute__((cold, noinline)) int rare(int x)
{
    __dtrace_sdt_sec__a();
    return x - 1;
}

/* A probe defined here: it must not get a stub, and calls to it are still sites. */
void __dtrace_sdt_sec__local(void) {}

int total(int x)
{
    __dtrace_sdt_sec__local();
    int s = f0(x) + f1(x) + f2(x) + f3(x) + f4(x) + f5(x) + f6(x) + f7(x);
    return x > 1000 ? rare(s) : custom(s);
}
