// Definitions of the LTO test program's probe symbols, for its reference link without bootprof:
// there the calls go here, so that the disassembly names every one of them.
void __dtrace_sdt_app__start(void) {}
void __dtrace_sdt_app__verbose(void) {}
void __dtrace_sdt_app__call(void) {}
void __dtrace_sdt_lib__work(void) {}
void __dtrace_sdt_lib__plain(void) {}
void __dtrace_sdt_lib__unused(void) {}
int __dtrace_isenabled_app__verbose(void) { return 0; }
int __dtrace_isenabled_app__call_detail(void) { return 0; }
