/* Times the ways of making a program's code private and writing into it, on a copy of that code
 * mapped from its file as the loader maps it: the first executable PT_LOAD of FILE, mapped
 * privately, read-execute, a byte of it read every 64 KiB (as a running program has faulted
 * some of it in). One way a run, printed in microseconds:
 *
 *   textcopy FILE cow     mprotect read-write, MADV_POPULATE_WRITE, a byte written every 64
 *                         bytes, mprotect back: the kernel copies each 4 KiB page on write
 *   textcopy FILE huge    a 2 MiB-aligned anonymous room advised MADV_HUGEPAGE, populated,
 *                         the code copied in, the bytes written, mprotect, mremap over the code
 *   textcopy FILE small   the same room in small pages (no advice)
 *   textcopy FILE memfd   no anonymous room: the code written into a memfd (whose pages the
 *                         kernel does not zero first), mapped shared read-write and populated,
 *                         the bytes written, then the memfd mapped privately over the code
 *   textcopy FILE memfd-send  the same, the memfd filled by sendfile from FILE's page cache
 *   textcopy FILE fill    only filling a huge room: populating it, then copying the code in
 *                         from its mapping, after MADV_POPULATE_READ, and with pread from the
 *                         file (four figures)
 *
 * Build: cc -O2 -o textcopy benches/runtime/textcopy.c. Run each way several times, in turn. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A 2 MiB-aligned anonymous room of `len` bytes rounded up to 2 MiB. */
static unsigned char *room(size_t len, int huge) {
    size_t h = 2 << 20, need = (len + h - 1) & ~(h - 1);
    unsigned char *r = mmap(0, need + h, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) { perror("mmap"); exit(1); }
    unsigned char *a = (unsigned char *)(((size_t)r + h - 1) & ~(h - 1));
    if (huge) madvise(a, need, MADV_HUGEPAGE);
    return a;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: textcopy FILE cow|huge|small|memfd|memfd-send|fill\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    Elf64_Ehdr eh;
    if (fd < 0 || pread(fd, &eh, sizeof eh, 0) != sizeof eh) { perror(argv[1]); return 1; }
    off_t off = -1;
    size_t len = 0;
    for (int i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread(fd, &ph, sizeof ph, eh.e_phoff + i * sizeof ph) != sizeof ph) return 1;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            off = ph.p_offset & ~4095UL;
            len = (ph.p_offset + ph.p_filesz - off + 4095) & ~4095UL;
            break;
        }
    }
    if (off < 0) { fprintf(stderr, "%s: no executable segment\n", argv[1]); return 1; }
    unsigned char *t = mmap(0, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, off);
    if (t == MAP_FAILED) { perror("mmap"); return 1; }
    volatile unsigned sum = 0;
    for (size_t i = 0; i < len; i += 16 * 4096) sum += t[i];
    const char *way = argv[2];
    double t0 = now_us();
    if (!strcmp(way, "cow")) {
        mprotect(t, len, PROT_READ | PROT_WRITE | PROT_EXEC);
        madvise(t, len, MADV_POPULATE_WRITE);
        for (size_t i = 0; i < len; i += 64) t[i] = 0x90;
        mprotect(t, len, PROT_READ | PROT_EXEC);
    } else if (!strcmp(way, "huge") || !strcmp(way, "small")) {
        unsigned char *a = room(len, way[0] == 'h');
        madvise(a, len, MADV_POPULATE_WRITE);
        memcpy(a, t, len);
        for (size_t i = 0; i < len; i += 64) a[i] = 0x90;
        mprotect(a, len, PROT_READ | PROT_EXEC);
        if (mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, t) != t) { perror("mremap"); return 1; }
    } else if (!strcmp(way, "memfd") || !strcmp(way, "memfd-send")) {
        int m = memfd_create("text", MFD_CLOEXEC);
        if (m < 0) { perror("memfd_create"); return 1; }
        if (!strcmp(way, "memfd-send")) {
            off_t o = off;
            if (sendfile(m, fd, &o, len) != (ssize_t)len) { perror("sendfile"); return 1; }
        } else if (write(m, t, len) != (ssize_t)len) {
            perror("write");
            return 1;
        }
        unsigned char *w = mmap(0, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, m, 0);
        if (w == MAP_FAILED) { perror("mmap"); return 1; }
        for (size_t i = 0; i < len; i += 64) w[i] = 0x90;
        int flags = MAP_PRIVATE | MAP_FIXED | MAP_POPULATE;
        if (mmap(t, len, PROT_READ | PROT_EXEC, flags, m, 0) != t) {
            perror("mmap");
            return 1;
        }
        munmap(w, len);
        close(m);
    } else if (!strcmp(way, "fill")) {
        double f[4];
        unsigned char *a = room(len, 1), *b = room(len, 1), *c = room(len, 1);
        double s = now_us();
        madvise(a, len, MADV_POPULATE_WRITE);
        f[0] = now_us() - s;
        madvise(b, len, MADV_POPULATE_WRITE);
        madvise(c, len, MADV_POPULATE_WRITE);
        s = now_us();
        memcpy(a, t, len);
        f[1] = now_us() - s;
        s = now_us();
        madvise(t, len, MADV_POPULATE_READ);
        memcpy(b, t, len);
        f[2] = now_us() - s;
        s = now_us();
        if (pread(fd, c, len, off) != (ssize_t)len) { perror("pread"); return 1; }
        f[3] = now_us() - s;
        printf("fill %zu bytes: populate %.0f, memcpy %.0f, populate_read+memcpy %.0f, pread %.0f\n",
               len, f[0], f[1], f[2], f[3]);
        return 0;
    } else {
        fprintf(stderr, "unknown way %s\n", way);
        return 2;
    }
    double t1 = now_us();
    if (t[64] != 0x90) { fprintf(stderr, "the write did not land\n"); return 1; }
    printf("%s %zu bytes: %.0f\n", way, len, t1 - t0);
    return 0;
}
