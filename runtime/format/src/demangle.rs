//! Symbol names as people read them: C++ (Itanium ABI) by `cpp_demangle`, Rust (legacy and v0)
//! by `rustc-demangle`. One definition for the rewriter (which stores each function's demangled
//! name in the site table, for the runtime's patterns) and the reports (which show it).

extern crate std;
use std::format;
use std::string::{String, ToString};

/// GCC's name for a translation unit's static initializer (`_GLOBAL__sub_I_<key>`), keyed to the
/// unit's first function (a mangled name) or to its file name. Neither demangler knows it.
const GLOBAL_CONSTRUCTORS: &str = "_GLOBAL__sub_I_";

/// `symbol` demangled, or `None` when it is not a mangled name (a C function) or does not
/// demangle. Rust names lose their hash (`{:#}`); C++ names read as `c++filt` prints them.
pub fn demangle(symbol: &str) -> Option<String> {
    if let Some(key) = symbol.strip_prefix(GLOBAL_CONSTRUCTORS) {
        let key = demangle(key).unwrap_or_else(|| key.to_string());
        return Some(format!("global constructors keyed to {key}"));
    }
    if !may_be_mangled(symbol.as_bytes()) {
        return None;
    }
    // A legacy Rust symbol is also a valid C++ one (`_ZN...17h<hash>E`): Rust first, which
    // checks the hash.
    if let Ok(rust) = rustc_demangle::try_demangle(symbol) {
        return Some(format!("{rust:#}"));
    }
    let cpp = cpp_demangle::Symbol::new(symbol).ok()?.demangle().ok()?;
    (!cpp.is_empty() && cpp != symbol).then_some(cpp)
}

/// Whether `symbol` may be a mangled name [`demangle`] turns into another (by its first bytes,
/// before reading it as text): false for a C name, which most symbols of a C program are.
pub fn may_be_mangled(symbol: &[u8]) -> bool {
    [&b"_Z"[..], b"_R", b"__Z", GLOBAL_CONSTRUCTORS.as_bytes()]
        .iter()
        .any(|p| symbol.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpp_rust_and_c_names() {
        let d = |s| demangle(s);
        assert_eq!(
            d("_ZN4Json5Value13nullSingletonEv").as_deref(),
            Some("Json::Value::nullSingleton()")
        );
        assert_eq!(
            d("_ZNK4Json5Value8asStringB5cxx11Ev").as_deref(),
            Some("Json::Value::asString[abi:cxx11]() const")
        );
        assert_eq!(
            d("_ZN3foo3barEv.constprop.0").as_deref(),
            Some("foo::bar() [clone .constprop.0]")
        );
        assert_eq!(
            d("_ZN12_GLOBAL__N_13fooEv").as_deref(),
            Some("(anonymous namespace)::foo()")
        );
        assert_eq!(
            d("_ZN4test4main17h0123456789abcdefE").as_deref(),
            Some("test::main")
        );
        assert_eq!(d("_RNvCs1234_4test4main").as_deref(), Some("test::main"));
        assert_eq!(
            d("_GLOBAL__sub_I__ZN9ValueTest3runEv").as_deref(),
            Some("global constructors keyed to ValueTest::run()")
        );
        assert_eq!(
            d("_GLOBAL__sub_I_main.cpp").as_deref(),
            Some("global constructors keyed to main.cpp")
        );
        for plain in ["main", "_Zfoo", "_start", "__libc_csu_init", ""] {
            assert_eq!(d(plain), None, "{plain}");
        }
    }
}
