// An archive member nothing references: the link must not take it, nor its sites.
#include "bootprof.h"

int unused_member(int x) {
    BOOTPROF_PROBE(lib, unused, x);
    return x;
}
