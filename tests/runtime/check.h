/* Helpers for the runtime test programs. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Table entries per BOOTPROF_PROBE: its guard and its call, or the call alone (BOOTPROF_GUARDS comes
 * from bootprof.h, included after this file). */
#define PER_PROBE (1 + BOOTPROF_GUARDS)

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond);                     \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct text_cmp {
    long differing;
    long compared;
};

static int text_cmp_cb(struct dl_phdr_info *info, size_t size, void *data) {
    struct text_cmp *c = data;
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0]) return 0; /* the main program only */
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return 1;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_X)) continue;
        unsigned char *file = malloc(p->p_filesz);
        fseek(f, (long)p->p_offset, SEEK_SET);
        if (fread(file, 1, p->p_filesz, f) != p->p_filesz) { free(file); continue; }
        const unsigned char *mem = (const unsigned char *)(info->dlpi_addr + p->p_vaddr);
        for (size_t k = 0; k < p->p_filesz; k++) c->differing += mem[k] != file[k];
        c->compared += (long)p->p_filesz;
        free(file);
    }
    fclose(f);
    return 1;
}

/* Number of bytes of the executable's loaded code that differ from the file (and how many were
 * compared). */
static struct text_cmp text_vs_file(void) {
    struct text_cmp c = {0, 0};
    dl_iterate_phdr(text_cmp_cb, &c);
    return c;
}
