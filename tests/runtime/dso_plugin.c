#include "bootprof.h"
int plugin_work(int x) { BOOTPROF_PROBE(plugin, work, x); return x + 1; }
