/*
 * bootprof.h: zero-cost probes for C and C++, and the runtime API that turns them on.
 *
 *   BOOTPROF_PROBE(provider, name, args...)   a named probe with up to 6 integer arguments
 *   BOOTPROF_ENABLED(provider, name)          1 when the probe is enabled, else 0
 *
 * Each probe is a call to `__dtrace_sdt_<provider>__<name>` (or `__dtrace_isenabled_...`).
 * `bootprof-link` turns every such call into one long NOP and records it in the program's site
 * table; the runtime can turn it back on while the program runs. Linked without bootprof-link,
 * the program needs the probe symbols defined elsewhere.
 *
 * Arguments are converted to `unsigned long` (pointers and integers; the runtime hands them to
 * handlers as the call's integer argument registers). Define BOOTPROF_NO_PROBES to compile every
 * probe out (the no-probe baseline).
 *
 * The runtime (libbootprof_runtime, linked into every program bootprof-link rewrites) finds the
 * sites; the functions below enable and disable them by pattern (`provider:name` for probes, the
 * function name for -pg / -finstrument-functions hooks; ftrace wildcards `x*`, `*x`, `*x*`, `*`)
 * and register handlers. Functions returning int return a count (or 0) on success, -1 on error
 * with the reason in bootprof_last_error().
 */
#ifndef BOOTPROF_H
#define BOOTPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum bootprof_kind {
    BOOTPROF_KIND_PROBE = 1,
    BOOTPROF_KIND_ISENABLED = 2,
    BOOTPROF_KIND_MCOUNT = 3,
    BOOTPROF_KIND_FENTRY = 4,
    BOOTPROF_KIND_CYG_ENTER = 5,
    BOOTPROF_KIND_CYG_EXIT = 6,
};

enum bootprof_mode {
    BOOTPROF_MODE_TRAP = 1, /* int3 over the site; the SIGTRAP handler dispatches */
    BOOTPROF_MODE_CALL = 2, /* the call to the site's stub is put back (faster) */
};

/* What a handler receives. */
struct bootprof_hit {
    uint32_t site_id;
    uint8_t kind;             /* enum bootprof_kind */
    uint8_t via;              /* enum bootprof_mode */
    uint16_t reserved;
    const char *provider;     /* "" for hooks */
    const char *name;         /* probe name, or the hook symbol */
    const char *function;     /* enclosing function */
    uint64_t site;            /* address of the site */
    uint64_t function_addr;   /* address of the enclosing function */
    uint64_t parent;          /* hooks: where the function returns to; else 0 */
    uint64_t args[6];         /* rdi, rsi, rdx, rcx, r8, r9 at the call */
    uint32_t tid;
    uint32_t reserved2;
    uint64_t tsc;             /* time stamp counter at the hit */
};

/* One site, from bootprof_site_info. */
struct bootprof_site {
    uint32_t id;
    uint8_t kind;             /* enum bootprof_kind */
    uint8_t mode;             /* 0 disabled, or enum bootprof_mode */
    uint16_t reserved;
    uint64_t address;
    const char *provider;
    const char *name;
    const char *function;
    uint32_t func_offset;
    uint32_t reserved2;
    uint64_t hits;
};

/* Called on every hit of a matching enabled site, on the hitting thread; in trap mode from a
 * SIGTRAP handler (use async-signal-safe code). Probes hit inside a handler are not dispatched. */
typedef void (*bootprof_handler_fn)(const struct bootprof_hit *hit, void *cookie);

int bootprof_enable(const char *pattern);                 /* trap mode */
int bootprof_enable_mode(const char *pattern, int mode);  /* enum bootprof_mode */
int bootprof_disable(const char *pattern);
int bootprof_notrace(const char *pattern);                /* never enable these (exclusion wins) */
void bootprof_clear_notrace(void);
int bootprof_add_handler(const char *pattern, bootprof_handler_fn fn, void *cookie);
int bootprof_remove_handler(int id);
int64_t bootprof_hits(const char *pattern);               /* sum of the matching sites' hit counts */
size_t bootprof_site_count(void);
int bootprof_site_info(size_t i, struct bootprof_site *out);
int bootprof_check(void);                                 /* 0 if the program took SIGTRAP from us */
const char *bootprof_last_error(void);

/* Recording (TSLOG-style event log of enabled sites' hits; BOOTPROF_OUTPUT=path starts it before
 * the first constructor and dumps at exit). */
int bootprof_record(int on);                              /* start (1) or stop (0) */
int64_t bootprof_dump(const char *path);                  /* NULL: BOOTPROF_OUTPUT or bootprof.<pid>.trace */
void bootprof_print_points(int fd);                       /* the profile-point table */

#ifdef __cplusplus
}
#endif

#ifdef BOOTPROF_NO_PROBES

#define BOOTPROF_PROBE(provider, name, ...) ((void)0)
#define BOOTPROF_ENABLED(provider, name) 0

#else

#define BOOTPROF__SYM(kind, provider, name) "__dtrace_" #kind "_" #provider "__" #name
#define BOOTPROF__ARG(a) ((unsigned long)(a))
#define BOOTPROF__NARGS(...) BOOTPROF__NARGS_(_, ##__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0)
#define BOOTPROF__NARGS_(_, a, b, c, d, e, f, n, ...) n
#define BOOTPROF__CAT(a, b) BOOTPROF__CAT_(a, b)
#define BOOTPROF__CAT_(a, b) a##b

/* The probe function is declared at block scope under an asm label, so the symbol is exactly
 * `__dtrace_sdt_<provider>__<name>` in C and in C++ (no mangling), and a probe needs no
 * declaration elsewhere. The local name carries the argument count: one probe used with different
 * counts declares different functions, never conflicting types. */
#define BOOTPROF__DECL(n, provider, name, ...)                                                    \
    extern void __bootprof_probe##n##_##provider##__##name(__VA_ARGS__)                          \
        __asm__(BOOTPROF__SYM(sdt, provider, name))

#define BOOTPROF__PROBE_0(p, n)                                                                   \
    do {                                                                                           \
        BOOTPROF__DECL(0, p, n, void);                                                             \
        __bootprof_probe0_##p##__##n();                                                            \
    } while (0)
#define BOOTPROF__PROBE_1(p, n, a)                                                                \
    do {                                                                                           \
        BOOTPROF__DECL(1, p, n, unsigned long);                                                    \
        __bootprof_probe1_##p##__##n(BOOTPROF__ARG(a));                                            \
    } while (0)
#define BOOTPROF__PROBE_2(p, n, a, b)                                                             \
    do {                                                                                           \
        BOOTPROF__DECL(2, p, n, unsigned long, unsigned long);                                     \
        __bootprof_probe2_##p##__##n(BOOTPROF__ARG(a), BOOTPROF__ARG(b));                          \
    } while (0)
#define BOOTPROF__PROBE_3(p, n, a, b, c)                                                          \
    do {                                                                                           \
        BOOTPROF__DECL(3, p, n, unsigned long, unsigned long, unsigned long);                      \
        __bootprof_probe3_##p##__##n(BOOTPROF__ARG(a), BOOTPROF__ARG(b), BOOTPROF__ARG(c));        \
    } while (0)
#define BOOTPROF__PROBE_4(p, n, a, b, c, d)                                                       \
    do {                                                                                           \
        BOOTPROF__DECL(4, p, n, unsigned long, unsigned long, unsigned long, unsigned long);       \
        __bootprof_probe4_##p##__##n(BOOTPROF__ARG(a), BOOTPROF__ARG(b), BOOTPROF__ARG(c),         \
                                     BOOTPROF__ARG(d));                                            \
    } while (0)
#define BOOTPROF__PROBE_5(p, n, a, b, c, d, e)                                                    \
    do {                                                                                           \
        BOOTPROF__DECL(5, p, n, unsigned long, unsigned long, unsigned long, unsigned long,        \
                       unsigned long);                                                             \
        __bootprof_probe5_##p##__##n(BOOTPROF__ARG(a), BOOTPROF__ARG(b), BOOTPROF__ARG(c),         \
                                     BOOTPROF__ARG(d), BOOTPROF__ARG(e));                          \
    } while (0)
#define BOOTPROF__PROBE_6(p, n, a, b, c, d, e, f)                                                 \
    do {                                                                                           \
        BOOTPROF__DECL(6, p, n, unsigned long, unsigned long, unsigned long, unsigned long,        \
                       unsigned long, unsigned long);                                              \
        __bootprof_probe6_##p##__##n(BOOTPROF__ARG(a), BOOTPROF__ARG(b), BOOTPROF__ARG(c),         \
                                     BOOTPROF__ARG(d), BOOTPROF__ARG(e), BOOTPROF__ARG(f));        \
    } while (0)

#define BOOTPROF_PROBE(provider, name, ...)                                                       \
    BOOTPROF__CAT(BOOTPROF__PROBE_, BOOTPROF__NARGS(__VA_ARGS__))(provider, name, ##__VA_ARGS__)

#define BOOTPROF_ENABLED(provider, name)                                                          \
    __extension__({                                                                                \
        extern int __bootprof_isenabled_##provider##__##name(void)                                \
            __asm__(BOOTPROF__SYM(isenabled, provider, name));                                     \
        __builtin_expect(__bootprof_isenabled_##provider##__##name(), 0);                          \
    })

#endif /* BOOTPROF_NO_PROBES */

/* Boot-profiling annotations, after FreeBSD's TSLOG: zero-cost NOP sites like every probe; the
 * recorder turns their hits into ENTER/EXIT/EVENT/WAIT/UNWAIT/HOLD/RELEASE/THREAD records.
 *   BOOTPROF_ENTER(); ... BOOTPROF_EXIT();   a region named after the enclosing function
 *   BOOTPROF_EVENT(name);                    a point in time
 *   BOOTPROF_WAIT(what); ... BOOTPROF_UNWAIT(what);   this thread waits for `what`
 *   BOOTPROF_HOLD(what); ... BOOTPROF_RELEASE(what);  this thread holds `what` (others wait on it)
 *   BOOTPROF_THREAD(name);                   names the calling thread
 * Names are identifiers. */
#define BOOTPROF_ENTER() BOOTPROF_PROBE(bootprof, enter)
#define BOOTPROF_EXIT() BOOTPROF_PROBE(bootprof, exit)
#define BOOTPROF_EVENT(name) BOOTPROF_PROBE(bpevent, name)
#define BOOTPROF_WAIT(what) BOOTPROF_PROBE(bpwait, what)
#define BOOTPROF_UNWAIT(what) BOOTPROF_PROBE(bpunwait, what)
#define BOOTPROF_HOLD(what) BOOTPROF_PROBE(bphold, what)
#define BOOTPROF_RELEASE(what) BOOTPROF_PROBE(bprelease, what)
#define BOOTPROF_THREAD(name) BOOTPROF_PROBE(bpthread, name)

#endif /* BOOTPROF_H */
