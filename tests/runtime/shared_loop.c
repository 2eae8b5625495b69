/* dlopen and dlclose, ROUNDS times, alternating two probed libraries that carry the runtime
 * (LIB=PATH each, loaded RTLD_LOCAL), in a host without it, with BOOTPROF_ENABLE='*:work': the
 * first loaded serves and stays (its runtime pins it: dlclose leaves it loaded, its sites and
 * counts stay), the other's sites come with each dlopen (enabled by the pattern) and go with
 * each dlclose, and every hit counts. The host reaches the runtime through the global scope. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <dlfcn.h>

#define CALLS 3

int main(int argc, char **argv) {
    CHECK(argc == 4, "usage: shared_loop LIB=PATH LIB=PATH ROUNDS");
    char lib[2][32];
    const char *path[2];
    for (int i = 0; i < 2; i++) {
        const char *eq = strchr(argv[i + 1], '=');
        CHECK(eq, "not LIB=PATH: %s", argv[i + 1]);
        snprintf(lib[i], sizeof lib[i], "%.*s", (int)(eq - argv[i + 1]), argv[i + 1]);
        path[i] = eq + 1;
    }
    int rounds = atoi(argv[3]);
    size_t alone = 0, both = 0;
    long opened[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        int i = r % 2;
        void *h = dlopen(path[i], RTLD_NOW | RTLD_LOCAL);
        CHECK(h, "round %d: %s", r, dlerror());
        opened[i]++;
        char name[64];
        snprintf(name, sizeof name, "%s_work", lib[i]);
        int (*work)(int) = (int (*)(int))dlsym(h, name);
        CHECK(work, "%s", dlerror());
        for (int k = 0; k < CALLS; k++) CHECK(work(k) == k + 1, "round %d: result", r);
        size_t (*sites)(void) = (size_t(*)(void))dlsym(RTLD_DEFAULT, "bootprof_site_count");
        long (*hits)(const char *) = (long (*)(const char *))dlsym(RTLD_DEFAULT, "bootprof_hits");
        CHECK(sites && hits, "round %d: no runtime in the global scope", r);
        snprintf(name, sizeof name, "%s:work", lib[i]);
        /* The first library's sites live on (pinned); the second's are new with each dlopen. */
        long want = i == 0 ? CALLS * opened[0] : CALLS;
        CHECK(hits(name) == want, "round %d: %ld hits of %s, not %ld", r, hits(name), name, want);
        size_t *seen = i == 0 ? &alone : &both;
        if (!*seen) *seen = sites();
        CHECK(sites() == *seen, "round %d: %zu sites, not %zu", r, sites(), *seen);
        CHECK(dlclose(h) == 0, "round %d: dlclose: %s", r, dlerror());
        void *still = dlopen(path[i], RTLD_NOW | RTLD_NOLOAD);
        CHECK((still != NULL) == (i == 0), "round %d: %s %s loaded after dlclose", r, lib[i],
              still ? "still" : "no longer");
        if (still) dlclose(still);
        CHECK(sites() == alone, "round %d: %zu sites after dlclose, not %zu", r, sites(), alone);
    }
    printf("%d rounds: %zu sites alone, %zu with %s; %s hits %ld\n", rounds, alone, both, lib[1],
           lib[0], CALLS * opened[0]);
    return 0;
}
