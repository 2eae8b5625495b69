//! Probe selection patterns, with ftrace's `set_ftrace_filter` wildcards: `name`, `prefix*`,
//! `*suffix`, `*middle*` and `*`. A named probe is matched as `provider:name`, a function hook by
//! its function's name. One definition for the runtime (which enables what they match) and
//! `bootprof run` (which says when one matches no site).

extern crate std;
use std::string::{String, ToString};
use std::vec::Vec;

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

impl std::error::Error for PatternError {}

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
    fn malformed() {
        for bad in ["", "a*b", "a?", "x,y", "a b", "*a*b*"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list("a, b*,,").unwrap().len(), 2);
    }
}
