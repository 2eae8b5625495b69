//! Reading `bootprof list --json`: a small JSON parser (the test crate has no JSON library) and
//! the listing it describes (DESIGN.md, "Command-line contract").

use crate::util::{cmd, run, Out, BOOTPROF};
use std::path::Path;

/// A JSON value. Numbers are kept as their text and read as integers on demand.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("trailing text at byte {}", p.i));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn eat(&mut self, b: u8) -> Result<(), String> {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Ok(())
        } else {
            self.err(&format!("expected `{}`", b as char))
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Object(members));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    self.eat(b':')?;
                    members.push((key, self.value()?));
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Object(members));
                        }
                        _ => return self.err("expected `,` or `}`"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    items.push(self.value()?);
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Array(items));
                        }
                        _ => return self.err("expected `,` or `]`"),
                    }
                }
            }
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Bool(true))
            }
            Some(b'f') if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Bool(false))
            }
            Some(b'n') if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(Value::Null)
            }
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                self.i += 1;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-'
                    )
                {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                Ok(Value::Number(text.to_string()))
            }
            _ => self.err("expected a value"),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        if self.s.get(self.i) != Some(&b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).map_err(|e| e.to_string());
                }
                Some(b'\\') => {
                    let c = *self.s.get(self.i + 1).ok_or("unterminated escape")?;
                    self.i += 2;
                    let simple = match c {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                    } else if c == b'u' {
                        let hex = self.s.get(self.i..self.i + 4).ok_or("short \\u escape")?;
                        let code = u32::from_str_radix(std::str::from_utf8(hex).unwrap(), 16)
                            .map_err(|e| e.to_string())?;
                        self.i += 4;
                        let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                        out.extend_from_slice(ch.to_string().as_bytes());
                    } else {
                        return self.err("bad escape");
                    }
                }
                Some(&b) => {
                    out.push(b);
                    self.i += 1;
                }
            }
        }
    }
}

/// One site of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub address: u64,
    pub file_offset: u64,
    pub kind: String,
    pub form: String,
    pub len: u64,
    /// `None` for hooks.
    pub provider: Option<String>,
    pub name: String,
    pub function: String,
    pub func_offset: u64,
    pub nop: bool,
}

/// What `bootprof list --json` printed.
#[derive(Debug, Clone)]
pub struct Listing {
    pub count: u64,
    pub nop_ok: u64,
    pub sites: Vec<Site>,
    /// The command and its output, for messages.
    pub out: String,
}

impl Listing {
    /// The sites as `(kind, form, function, func_offset)`, sorted: what two builds of the same
    /// objects must agree on.
    pub fn identities(&self) -> Vec<(String, String, String, u64)> {
        let mut v: Vec<_> = self
            .sites
            .iter()
            .map(|s| {
                (
                    s.kind.clone(),
                    s.form.clone(),
                    s.function.clone(),
                    s.func_offset,
                )
            })
            .collect();
        v.sort();
        v
    }
}

/// Runs `bootprof list --json binary` and parses what it prints. Does not look at the exit code
/// (the caller does; it is 1 when a site does not hold its NOP).
#[track_caller]
pub fn list(binary: &Path) -> (Listing, Out) {
    let out = run(&mut cmd(
        BOOTPROF,
        ["list".as_ref(), "--json".as_ref(), binary.as_os_str()],
    ));
    out.no_panic();
    let v = parse(&out.stdout).unwrap_or_else(|e| panic!("bad JSON ({e}): {out}"));
    let field = |s: &Value, k: &str| -> Value {
        s.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("no `{k}` in a site of: {out}"))
    };
    let num = |s: &Value, k: &str| -> u64 {
        field(s, k)
            .as_u64()
            .unwrap_or_else(|| panic!("`{k}` is not an integer in: {out}"))
    };
    let text = |s: &Value, k: &str| -> String {
        match field(s, k) {
            Value::String(t) => t,
            Value::Null => String::new(),
            _ => panic!("`{k}` is not a string in: {out}"),
        }
    };
    let Some(Value::Array(items)) = v.get("sites") else {
        panic!("no `sites` array in: {out}");
    };
    let sites = items
        .iter()
        .map(|s| Site {
            address: num(s, "address"),
            file_offset: num(s, "file_offset"),
            kind: text(s, "kind"),
            form: text(s, "form"),
            len: num(s, "len"),
            provider: match field(s, "provider") {
                Value::Null => None,
                Value::String(p) => Some(p),
                _ => panic!("`provider` is neither null nor a string in: {out}"),
            },
            name: text(s, "name"),
            function: text(s, "function"),
            func_offset: num(s, "func_offset"),
            nop: match field(s, "nop") {
                Value::Bool(b) => b,
                _ => panic!("`nop` is not a boolean in: {out}"),
            },
        })
        .collect();
    let listing = Listing {
        count: num(&v, "count"),
        nop_ok: num(&v, "nop_ok"),
        sites,
        out: out.to_string(),
    };
    (listing, out)
}

#[test]
fn json_parser_reads_the_documented_example() {
    let v = parse(
        r#"{"file": "a\"b", "count": 1, "nop_ok": 1, "sites": [{"address": 4409,
        "provider": null, "nop": true, "x": [], "y": {}, "z": -1.5e3}]}"#,
    )
    .unwrap();
    assert_eq!(v.get("file").and_then(Value::as_str), Some("a\"b"));
    assert_eq!(v.get("count").and_then(Value::as_u64), Some(1));
    let Some(Value::Array(sites)) = v.get("sites") else {
        panic!()
    };
    assert_eq!(sites[0].get("provider"), Some(&Value::Null));
    assert_eq!(sites[0].get("nop"), Some(&Value::Bool(true)));
    assert!(parse("{").is_err());
    assert!(parse("[1,]").is_err());
}
