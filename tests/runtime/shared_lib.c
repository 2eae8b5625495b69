/* A probed shared library, built as liba and libb (-DLIB=liba, -DLIB=libb) and linked by
 * bootprof-link, so that it carries the runtime: LIB_work hits the probe LIB:work; LIB_sites and
 * LIB_hits ask the runtime this library's own calls bind to. */
#include <stddef.h>
#include "bootprof.h"
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
int CAT(LIB, _work)(int x) { BOOTPROF_PROBE(LIB, work, x); return x + 1; }
size_t CAT(LIB, _sites)(void) { return bootprof_site_count(); }
long CAT(LIB, _hits)(const char *pattern) { return bootprof_hits(pattern); }
