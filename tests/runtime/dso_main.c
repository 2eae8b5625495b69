/* A shared library linked at start and one loaded with dlopen register their own tables with the
 * executable's runtime; both modes work in them. */
#include "check.h" /* first: it defines _GNU_SOURCE */
#include <dlfcn.h>
#include "bootprof.h"
int dso_work(int);
int main(int argc, char **argv) {
    CHECK(argc > 1, "usage: dso_main PLUGIN.so");
    size_t before = bootprof_site_count();
    CHECK(bootprof_enable_mode("dso:*", BOOTPROF_MODE_CALL) == PER_PROBE, "%s", bootprof_last_error());
    for (int i = 0; i < 10; i++) CHECK(dso_work(i) == 2 * i, "dso result");
    CHECK(bootprof_hits("dso:work") == 10, "dso hits");
    void *h = dlopen(argv[1], RTLD_NOW);
    CHECK(h, "%s", dlerror());
    int (*plugin)(int) = (int (*)(int))dlsym(h, "plugin_work");
    CHECK(bootprof_site_count() == before + PER_PROBE, "plugin registered");
    CHECK(bootprof_enable("plugin:*") == PER_PROBE, "%s", bootprof_last_error());
    for (int i = 0; i < 5; i++) CHECK(plugin(i) == i + 1, "plugin result");
    CHECK(bootprof_hits("plugin:work") == 5, "plugin hits");
    /* Unloading the plugin forgets its (enabled) sites: nothing may patch its old addresses. */
    CHECK(dlclose(h) == 0, "dlclose");
    CHECK(bootprof_site_count() == before, "plugin sites still registered after dlclose");
    /* dso:work's call changes to trap mode; its guard, enabled already, stays as it is. */
    CHECK(bootprof_enable("*") == (int)before - BOOTPROF_GUARDS, "enable after dlclose: %s", bootprof_last_error());
    CHECK(bootprof_disable("*") == (int)before, "disable after dlclose");
    printf("shared library, dlopen and dlclose: ok\n");
    return 0;
}
