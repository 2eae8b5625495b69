//! Patterns that matched no site: takes the patterns `bootprof run` was given (each with the
//! option or variable it came from) and the sites they were applied to (the session's, else the
//! program's own table); hands on one warning line per pattern that matched none, naming the
//! programs and the nearest site names. A warning, not an error: the program has run by then
//! (only the session knows every site, shared libraries' included), and its exit status stands.

use crate::missing::find_program;
use crate::Trace;
use bootprof_format::pattern::{self, Pattern};
use bootprof_format::Kind;
use std::ffi::OsStr;

/// A site as patterns see it (`bootprof_format::pattern::site_matches`): probes by
/// `provider:name`, hooks and the `BOOTPROF_ENTER()`/`EXIT()` annotations (provider `bootprof`)
/// by their function, symbol or demangled name.
struct SiteName {
    match_name: String,
    provider: String,
    function: String,
    demangled: String,
}

impl SiteName {
    fn new(kind: Kind, provider: &str, name: &str, symbol: &str, demangled: Option<&str>) -> Self {
        SiteName {
            match_name: if kind.is_hook() {
                symbol.to_string()
            } else {
                format!("{provider}:{name}")
            },
            provider: provider.to_string(),
            function: symbol.to_string(),
            demangled: demangled.unwrap_or_default().to_string(),
        }
    }

    fn matches(&self, p: &Pattern) -> bool {
        pattern::site_matches(
            p,
            &self.match_name,
            &self.provider,
            &self.function,
            &self.demangled,
        )
    }

    /// The names a pattern may have been meant for: the match name, and the function's (its
    /// demangled name if it has one) for hooks and annotations.
    fn names(&self) -> impl Iterator<Item = &str> {
        let by_function = self.provider.is_empty() || self.provider == "bootprof";
        let function = if self.demangled.is_empty() {
            &self.function
        } else {
            &self.demangled
        };
        std::iter::once(self.match_name.as_str())
            .chain(by_function.then_some(function.as_str()))
            .filter(|n| !n.is_empty())
    }
}

/// The sites the patterns were applied to: those of the trace (every object that registered,
/// shared libraries included; its names demangled), or, without a trace, those of the program's
/// own table; `None` when neither can be read.
fn site_names(trace: Option<&Trace>, program: &OsStr) -> Option<Vec<SiteName>> {
    if let Some(t) = trace {
        let sites = t.sites.iter().map(|s| {
            let (symbol, demangled) = match &s.symbol {
                Some(symbol) => (symbol.as_str(), Some(s.function.as_str())),
                None => (s.function.as_str(), None),
            };
            SiteName::new(s.kind, &s.provider, &s.name, symbol, demangled)
        });
        return Some(sites.collect());
    }
    let listing = crate::list::list(&find_program(program)?).ok()?;
    let sites = listing.sites.iter().map(|s| {
        let provider = s.provider.as_deref().unwrap_or("");
        let symbol = s.function.as_deref().unwrap_or("");
        let demangled = crate::list::ListedSite::demangled_name(&s.demangled, symbol);
        SiteName::new(s.kind, provider, &s.name, symbol, demangled.as_deref())
    });
    Some(sites.collect())
}

/// The programs whose sites the patterns were applied to: `program` as it was named, then the
/// other executables of the session's processes (at most three in all, then how many more).
fn programs(trace: Option<&Trace>, program: &OsStr) -> String {
    let root = trace.and_then(|t| t.processes.iter().find(|p| p.pid == t.header.pid));
    let mut names: Vec<String> = vec![program.to_string_lossy().into_owned()];
    let mut exes: Vec<&str> = root.map(|p| p.exe.as_str()).into_iter().collect();
    for p in trace.map_or(&[][..], |t| &t.processes) {
        if !exes.contains(&p.exe.as_str()) {
            exes.push(&p.exe);
            names.push(p.exe.clone());
        }
    }
    if names.len() > 3 {
        let more = names.len() - 3;
        names.truncate(3);
        return format!("{} and {more} more", names.join(", "));
    }
    names.join(", ")
}

/// One warning for each pattern `given` (with the option or variable it came from: `-e`,
/// `BOOTPROF_ENABLE`, ...) that matched none of the sites of the program and of the other
/// processes of its session, with the nearest names; nothing when the sites cannot be read.
pub fn unmatched_patterns(
    given: &[(&str, &Vec<String>)],
    trace: Option<&Trace>,
    program: &OsStr,
) -> Vec<String> {
    if given.iter().all(|(_, texts)| texts.is_empty()) {
        return Vec::new();
    }
    let Some(sites) = site_names(trace, program) else {
        return Vec::new();
    };
    let of = programs(trace, program);
    let mut lines = Vec::new();
    for &(option, texts) in given {
        for text in texts.iter() {
            // A pattern that does not parse is the runtime's to report.
            let Ok(patterns) = pattern::parse_list(text) else {
                continue;
            };
            let texts = text.split(',').map(str::trim).filter(|t| !t.is_empty());
            for (p, text) in patterns.iter().zip(texts) {
                if sites.iter().any(|s| s.matches(p)) {
                    continue;
                }
                lines.push(if sites.is_empty() {
                    format!(
                        "warning: pattern `{text}` ({option}) matched no site of {of}: it has none"
                    )
                } else {
                    format!(
                        "warning: pattern `{text}` ({option}) matched no site of {of} ({} \
                         site{}); nearest: {}",
                        sites.len(),
                        if sites.len() == 1 { "" } else { "s" },
                        nearest(p, &sites).join(", ")
                    )
                });
            }
        }
    }
    lines
}

/// The three site names closest to `p` (edit distance from the pattern's literal text to the
/// part of the name it would have to match).
fn nearest(p: &Pattern, sites: &[SiteName]) -> Vec<String> {
    let literal = match p {
        Pattern::Exact(s) | Pattern::Prefix(s) | Pattern::Suffix(s) | Pattern::Contains(s) => s,
        Pattern::Any => return Vec::new(),
    };
    let distance = |name: &str| -> usize {
        let chars: Vec<char> = name.chars().collect();
        let n = literal.chars().count().min(chars.len());
        let part = |from: usize| chars[from..from + n].iter().collect::<String>();
        match p {
            Pattern::Prefix(_) => strsim::levenshtein(literal, &part(0)),
            Pattern::Suffix(_) => strsim::levenshtein(literal, &part(chars.len() - n)),
            Pattern::Contains(_) => (0..=chars.len() - n)
                .map(|i| strsim::levenshtein(literal, &part(i)))
                .min()
                .unwrap_or(usize::MAX),
            _ => strsim::levenshtein(literal, name),
        }
    };
    let mut names: Vec<&str> = sites.iter().flat_map(SiteName::names).collect();
    names.sort_unstable();
    names.dedup();
    let mut scored: Vec<(usize, &str)> = names.into_iter().map(|n| (distance(n), n)).collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(3)
        .map(|(_, n)| n.to_string())
        .collect()
}
