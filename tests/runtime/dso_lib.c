#include "bootprof.h"
int dso_work(int x) { BOOTPROF_PROBE(dso, work, x); return x * 2; }
