//! Probe selection patterns, with ftrace's `set_ftrace_filter` wildcards: `name`, `prefix*`,
//! `*suffix`, `*middle*` and `*`. A named probe is matched as `provider:name`, a function hook by
//! its function's name: the symbol, and for a C++ or Rust function also its demangled name, with
//! or without its parameter list (`_ZN4Json5Value8asStringEv`, `Json::Value::asString() const`
//! and `Json::Value::asString` all select it). One definition for the runtime (which enables
//! what they match) and `bootprof run` (which says when one matches no site).

extern crate alloc;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Matches exactly this text.
    Exact(String),
    /// `text*`.
    Prefix(String),
    /// `*text`.
    Suffix(String),
    /// `*text*`.
    Contains(String),
    /// `*`.
    Any,
}

/// Why a pattern is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatternError {
    /// The pattern.
    pub pattern: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl core::fmt::Display for PatternError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "bad pattern `{}`: {}", self.pattern, self.why)
    }
}

impl core::error::Error for PatternError {}

impl Pattern {
    /// Parses `text`. A `*` anywhere but at the ends, `?`, `[`, whitespace, commas and the empty
    /// pattern are errors.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let err = |why| PatternError {
            pattern: text.to_string(),
            why,
        };
        if text.is_empty() {
            return Err(err("empty"));
        }
        if text
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, ',' | '?' | '[' | ']'))
        {
            return Err(err("only `*` at the start or end is a wildcard"));
        }
        if text == "*" || text == "**" {
            return Ok(Pattern::Any);
        }
        let lead = text.starts_with('*');
        let trail = text.ends_with('*');
        let inner = &text[usize::from(lead)..text.len() - usize::from(trail)];
        if inner.contains('*') {
            return Err(err("`*` may only stand at the start or the end"));
        }
        let inner = inner.to_string();
        Ok(match (lead, trail) {
            (false, false) => Pattern::Exact(inner),
            (false, true) => Pattern::Prefix(inner),
            (true, false) => Pattern::Suffix(inner),
            (true, true) => Pattern::Contains(inner),
        })
    }

    /// Whether `name` matches.
    #[inline]
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Pattern::Exact(s) => name == s,
            Pattern::Prefix(s) => name.starts_with(s.as_str()),
            Pattern::Suffix(s) => name.ends_with(s.as_str()),
            Pattern::Contains(s) => name.contains(s.as_str()),
            Pattern::Any => true,
        }
    }
}

/// Whether `pattern` selects a site of these names: `match_name` is `provider:name` for a probe
/// and the function's symbol for a hook; a hook, and an annotation of provider `bootprof`
/// (`BOOTPROF_ENTER()`, whose region is its function), is also matched by its function's symbol
/// and by its `demangled` name (empty when the symbol is not mangled), whole or without its
/// parameter list.
#[inline]
pub fn site_matches(
    pattern: &Pattern,
    match_name: &str,
    provider: &str,
    function: &str,
    demangled: &str,
) -> bool {
    if matches!(pattern, Pattern::Any) || pattern.matches(match_name) {
        return true;
    }
    if !(provider.is_empty() || provider == "bootprof") {
        return false;
    }
    pattern.matches(function)
        || (!demangled.is_empty()
            && (pattern.matches(demangled) || pattern.matches(without_parameters(demangled))))
}

/// A demangled C++ name without its parameter list and what follows it (`const`, `&`, GCC's
/// `[clone .cold]`): `ns::f<int>(int, char) const` gives `ns::f<int>`. Names with no parameter
/// list (Rust's, `global constructors keyed to ...`) are returned whole. The list is the `(...)`
/// whose `)` is the last one of the name, so `operator()(int)` gives `operator()` and
/// `(anonymous namespace)::f()` gives `(anonymous namespace)::f`.
pub fn without_parameters(name: &str) -> &str {
    let mut end = name.len();
    while let Some(at) = name[..end].rfind(" [clone ") {
        if !name[..end].ends_with(']') {
            break;
        }
        end = at;
    }
    let Some(close) = name[..end].rfind(')') else {
        return name;
    };
    let mut depth = 0usize;
    for (i, c) in name[..=close].char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return if i == 0 { name } else { &name[..i] };
                }
            }
            _ => {}
        }
    }
    name
}

/// Parses a comma-separated list of patterns (as in `BOOTPROF_ENABLE`), skipping empty items.
pub fn parse_list(text: &str) -> Result<Vec<Pattern>, PatternError> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(Pattern::parse)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        let p = |s| Pattern::parse(s).unwrap();
        assert!(p("app:start").matches("app:start"));
        assert!(!p("app:start").matches("app:started"));
        assert!(p("app:*").matches("app:anything"));
        assert!(p("*_lock").matches("mutex_lock"));
        assert!(p("*sched*").matches("do_schedule"));
        assert!(p("*").matches(""));
        assert!(!p("app:*").matches("db:query"));
    }

    #[test]
    fn demangled_names_without_their_parameters() {
        for (name, bare) in [
            (
                "Json::Value::asString[abi:cxx11]() const",
                "Json::Value::asString[abi:cxx11]",
            ),
            ("ns::f<int>(int, char) const &", "ns::f<int>"),
            (
                "std::function<void (int)>::operator()(int) const",
                "std::function<void (int)>::operator()",
            ),
            ("(anonymous namespace)::foo()", "(anonymous namespace)::foo"),
            ("foo::bar() [clone .constprop.0] [clone .cold]", "foo::bar"),
            ("test::main", "test::main"),
            (
                "global constructors keyed to main.cpp",
                "global constructors keyed to main.cpp",
            ),
            ("(broken", "(broken"),
            ("()", "()"),
        ] {
            assert_eq!(without_parameters(name), bare, "{name}");
        }
    }

    #[test]
    fn hooks_match_by_symbol_and_demangled_name_probes_by_provider_and_name() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        let sym = "_ZNK4Json5Value8asStringEv";
        let dem = "Json::Value::asString() const";
        let hook = |pat: &str| site_matches(&p(pat), sym, "", sym, dem);
        assert!(hook("_ZNK4Json5Value8asStringEv"));
        assert!(hook("Json::Value::*"));
        assert!(hook("Json::Value::asString"));
        assert!(hook("*::asString"));
        assert!(hook("*::asString()*"));
        assert!(!hook("*::asInt"));
        let probe = |pat: &str| site_matches(&p(pat), "app:start", "app", sym, dem);
        assert!(probe("app:*"));
        assert!(
            !probe("Json::Value::*"),
            "a probe is selected by its own name only"
        );
        let annotation = |pat: &str| site_matches(&p(pat), "bootprof:enter", "bootprof", sym, dem);
        assert!(annotation("Json::Value::asString"));
    }

    #[test]
    fn malformed() {
        for bad in ["", "a*b", "a?", "x,y", "a b", "*a*b*"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list("a, b*,,").unwrap().len(), 2);
    }
}
