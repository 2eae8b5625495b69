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
 * Guards (gcc, g++, and clang for C): the call and its argument set-up go out of line, behind a
 * 5-byte NOP written by an `asm goto` and recorded in section .bootprof_guard. In line, a disabled
 * probe is that NOP and nothing else: no argument moves, no registers saved for the call. Enabling
 * the probe turns the NOP into a jump to the out-of-line call (and the call's own site on, as
 * usual); an is-enabled test becomes a NOP whose enabled jump takes the "true" branch. Define
 * BOOTPROF_CALL_SITES for plain calls in line instead (what clang++ always gets: it refuses an
 * `asm goto` whose possible targets lie past a C++ initialisation).
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
int bootprof_stacktrace(const char *pattern, int on);     /* record each hit's call stack (1) or not (0) */
int bootprof_set_graph(int on);                           /* record hooked functions' exits (1) or not (0) */
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
int64_t bootprof_dump(const char *path);                  /* NULL: BOOTPROF_OUTPUT or bootprof.<pid>.trace;
                                                             BOOTPROF_COUNT=1: writes the hit counts so far */
/* Profile points (every recorded ENTER/EXIT pair: count, total, min, max per function) are
 * accounted from BOOTPROF_POINTS=1 (`bootprof run --points`: from the start), from
 * bootprof_count_points(), or else from the first bootprof_print_points() (which finds none). */
void bootprof_count_points(void);                         /* account profile points from now on */
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

/* BOOTPROF_GUARDS: 1 when probes compile to guards (each BOOTPROF_PROBE is then two sites in the
 * table, its guard and its out-of-line call; each BOOTPROF_ENABLED one, its guard), else 0. */
#if !defined(BOOTPROF_CALL_SITES) && defined(__GNUC__) &&                                          \
    !(defined(__clang__) && defined(__cplusplus))
#define BOOTPROF__GUARDS 1
#define BOOTPROF_GUARDS 1
#else
#define BOOTPROF_GUARDS 0
#endif

#ifdef BOOTPROF__GUARDS
/* One 5-byte NOP, and its record for bootprof-link: where it is, where its enabled jump goes, and
 * which probe it belongs to (layout: bootprof_format::GUARD_SECTION). */
#define BOOTPROF__GUARD(sym, label)                                                                \
    __asm__ goto("1: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"                                       \
                 ".pushsection .bootprof_guard, \"?\", @progbits\n\t"                              \
                 ".balign 8\n\t"                                                                   \
                 ".long 1b - ., %l[" #label "] - .\n\t"                                            \
                 ".quad " sym "\n\t"                                                               \
                 ".popsection"                                                                     \
                 : : : : label)
/* The out-of-line code behind a guard (reached only through the enabled guard's jump; it falls
 * back in line). It calls the probe from an asm statement rather than as a C function: no
 * declaration is needed (g++ drops the asm label of a block-scope declaration inside a template),
 * and the compiler need not free any register for the call. The asm steps over the red zone and
 * keeps the argument registers it loads (the arguments go through the stack into rdi, rsi, ...,
 * so any register may hold any of them); bootprof's stub and trampoline keep every other general
 * register but r11 and align the stack (so bootprof-link refuses a guard whose probe function the
 * program defines itself). Vector and x87 registers are declared clobbered. */
#define BOOTPROF__GUARDED(p, n, ...)                                                               \
    __extension__({                                                                                \
        __label__ bootprof__on;                                                                    \
        BOOTPROF__GUARD(BOOTPROF__SYM(sdt, p, n), bootprof__on);                                   \
        if (0) {                                                                                   \
        bootprof__on:                                                                              \
            __VA_ARGS__;                                                                           \
        }                                                                                          \
        (void)0;                                                                                   \
    })
#ifdef __AVX512F__
#define BOOTPROF__CLOBBERS_AVX512                                                                  \
    , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25",    \
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6",  \
        "k7"
#else
#define BOOTPROF__CLOBBERS_AVX512
#endif
/* `setup` saves the argument registers and loads them; `restore` puts them back. */
#define BOOTPROF__CALL(p, n, setup, restore, ...)                                                  \
    __asm__ volatile("lea -128(%%rsp), %%rsp\n\t" setup                                            \
                     "call " BOOTPROF__SYM(sdt, p, n) "\n\t" restore                               \
                     "lea 128(%%rsp), %%rsp"                                                       \
                     :                                                                             \
                     : __VA_ARGS__                                                                 \
                     : "r11", "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",      \
                       "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",         \
                       "xmm14", "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)",        \
                       "st(6)", "st(7)", "mm0", "mm1", "mm2", "mm3", "mm4", "mm5", "mm6", "mm7"    \
                       BOOTPROF__CLOBBERS_AVX512)
#define BOOTPROF__PROBE_0(p, n) BOOTPROF__GUARDED(p, n, BOOTPROF__CALL(p, n, "", ""))
#define BOOTPROF__PROBE_1(p, n, a)                                                                 \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %0\n\tpop %%rdi\n\t",                     \
                                     "pop %%rdi\n\t",                                              \
                                     "r"(BOOTPROF__ARG(a))))
#define BOOTPROF__PROBE_2(p, n, a, b)                                                              \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %%rsi\n\tpush %1\n\tpush %0\n\t"          \
                                     "pop %%rdi\n\tpop %%rsi\n\t",                                 \
                                     "pop %%rsi\n\tpop %%rdi\n\t",                                 \
                                     "r"(BOOTPROF__ARG(a)), "r"(BOOTPROF__ARG(b))))
#define BOOTPROF__PROBE_3(p, n, a, b, c)                                                           \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %%rsi\n\tpush %%rdx\n\tpush %2\n\t"       \
                                     "push %1\n\tpush %0\n\tpop %%rdi\n\tpop %%rsi\n\t"            \
                                     "pop %%rdx\n\t",                                              \
                                     "pop %%rdx\n\tpop %%rsi\n\tpop %%rdi\n\t",                    \
                                     "r"(BOOTPROF__ARG(a)), "r"(BOOTPROF__ARG(b)),                 \
                                     "r"(BOOTPROF__ARG(c))))
#define BOOTPROF__PROBE_4(p, n, a, b, c, d)                                                        \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %%rsi\n\tpush %%rdx\n\tpush %%rcx\n\t"    \
                                     "push %3\n\tpush %2\n\tpush %1\n\tpush %0\n\t"                \
                                     "pop %%rdi\n\tpop %%rsi\n\tpop %%rdx\n\tpop %%rcx\n\t",       \
                                     "pop %%rcx\n\tpop %%rdx\n\tpop %%rsi\n\tpop %%rdi\n\t",       \
                                     "r"(BOOTPROF__ARG(a)), "r"(BOOTPROF__ARG(b)),                 \
                                     "r"(BOOTPROF__ARG(c)), "r"(BOOTPROF__ARG(d))))
#define BOOTPROF__PROBE_5(p, n, a, b, c, d, e)                                                     \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %%rsi\n\tpush %%rdx\n\tpush %%rcx\n\t"    \
                                     "push %%r8\n\tpush %4\n\tpush %3\n\tpush %2\n\t"              \
                                     "push %1\n\tpush %0\n\tpop %%rdi\n\tpop %%rsi\n\t"            \
                                     "pop %%rdx\n\tpop %%rcx\n\tpop %%r8\n\t",                     \
                                     "pop %%r8\n\tpop %%rcx\n\tpop %%rdx\n\tpop %%rsi\n\t"         \
                                     "pop %%rdi\n\t",                                              \
                                     "r"(BOOTPROF__ARG(a)), "r"(BOOTPROF__ARG(b)),                 \
                                     "r"(BOOTPROF__ARG(c)), "r"(BOOTPROF__ARG(d)),                 \
                                     "r"(BOOTPROF__ARG(e))))
#define BOOTPROF__PROBE_6(p, n, a, b, c, d, e, f)                                                  \
    BOOTPROF__GUARDED(p, n,                                                                        \
                      BOOTPROF__CALL(p, n,                                                         \
                                     "push %%rdi\n\tpush %%rsi\n\tpush %%rdx\n\tpush %%rcx\n\t"    \
                                     "push %%r8\n\tpush %%r9\n\tpush %5\n\tpush %4\n\t"            \
                                     "push %3\n\tpush %2\n\tpush %1\n\tpush %0\n\t"                \
                                     "pop %%rdi\n\tpop %%rsi\n\tpop %%rdx\n\tpop %%rcx\n\t"        \
                                     "pop %%r8\n\tpop %%r9\n\t",                                   \
                                     "pop %%r9\n\tpop %%r8\n\tpop %%rcx\n\tpop %%rdx\n\t"          \
                                     "pop %%rsi\n\tpop %%rdi\n\t",                                 \
                                     "r"(BOOTPROF__ARG(a)), "r"(BOOTPROF__ARG(b)),                 \
                                     "r"(BOOTPROF__ARG(c)), "r"(BOOTPROF__ARG(d)),                 \
                                     "r"(BOOTPROF__ARG(e)), "r"(BOOTPROF__ARG(f))))

#else /* plain calls in line */

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

#endif /* BOOTPROF__GUARDS */

#define BOOTPROF_PROBE(provider, name, ...)                                                       \
    BOOTPROF__CAT(BOOTPROF__PROBE_, BOOTPROF__NARGS(__VA_ARGS__))(provider, name, ##__VA_ARGS__)

#ifdef BOOTPROF__GUARDS
/* No call at all: the guard's enabled jump lands on the "true" branch. (The flag is assigned, not
 * initialised, so that no jump skips an initialisation.) */
#define BOOTPROF_ENABLED(provider, name)                                                          \
    __extension__({                                                                                \
        __label__ bootprof__yes;                                                                   \
        int bootprof__on;                                                                          \
        BOOTPROF__GUARD(BOOTPROF__SYM(isenabled, provider, name), bootprof__yes);                  \
        bootprof__on = 0;                                                                          \
        if (0) {                                                                                   \
        bootprof__yes:                                                                             \
            bootprof__on = 1;                                                                      \
        }                                                                                          \
        __builtin_expect(bootprof__on, 0);                                                         \
    })
#else
#define BOOTPROF_ENABLED(provider, name)                                                          \
    __extension__({                                                                                \
        extern int __bootprof_isenabled_##provider##__##name(void)                                \
            __asm__(BOOTPROF__SYM(isenabled, provider, name));                                     \
        __builtin_expect(__bootprof_isenabled_##provider##__##name(), 0);                          \
    })
#endif

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
