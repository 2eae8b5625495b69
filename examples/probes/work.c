#include <stdlib.h>
#include <string.h>
#include "bootprof.h"
#include "work.h"

struct config parse_config(const char *text) {
    struct config cfg = {0};
    const char *p = text;
    while (*p && cfg.count < 16) {
        const char *eq = strchr(p, '=');
        if (!eq) break;
        cfg.values[cfg.count] = strtol(eq + 1, NULL, 10);
        BOOTPROF_PROBE(config, entry, cfg.count, cfg.values[cfg.count]);
        cfg.count++;
        const char *comma = strchr(eq, ',');
        if (!comma) break;
        p = comma + 1;
    }
    return cfg;
}

/* The probe is the last call: at -O2 the compiler emits a tail jump, which bootprof turns into
 * `ret` + NOP. */
static void note_step(unsigned long i, unsigned long v) { BOOTPROF_PROBE(work, step, i, v); }

unsigned long step(const struct config *cfg, int i) {
    unsigned long v = (unsigned long)cfg->values[i % (cfg->count ? cfg->count : 1)] * (unsigned long)(i + 1);
    note_step((unsigned long)i, v);
    return v;
}
