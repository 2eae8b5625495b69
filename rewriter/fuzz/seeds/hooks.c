/* Profiling hooks: built with -pg -mfentry (__fentry__), -pg alone (mcount) and
 * -finstrument-functions (__cyg_profile_func_enter/exit) by make-seeds. */
extern void __dtrace_sdt_hooks__tick(int);

static int helper(int x)
{
    return x * x + 1;
}

int compute(int a, int b)
{
    int r = helper(a) + helper(b);
    __dtrace_sdt_hooks__tick(r);
    return r;
}

int main(int argc, char **argv)
{
    (void)argv;
    return compute(argc, 2) & 1;
}
