/* The other translation unit of the disabled-probe benchmark (linked into every variant, no LTO):
 * the if_fp variant's hook pointer (a plain global, NULL: the probe is off) and the call_empty
 * variant's empty function. Being defined here, neither is visible to the optimizer of
 * workload.c: the pointer must be loaded where the code reads it (and again after any call), and
 * the empty function must really be called. */
void (*probe_fp)(unsigned long) = 0;

__attribute__((noipa)) void empty_hook(unsigned long arg) { (void)arg; }
