//! Reading `bootprof list --json` with serde_json: the listing it describes (DESIGN.md,
//! "Command-line contract").

use crate::util::{cmd, run, Out, BOOTPROF};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::path::Path;

/// One site of a listing. Every member must be present.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Site {
    pub address: u64,
    pub file_offset: u64,
    #[serde(deserialize_with = "text")]
    pub kind: String,
    #[serde(deserialize_with = "text")]
    pub form: String,
    pub len: u64,
    /// `None` for hooks.
    #[serde(deserialize_with = "nullable")]
    pub provider: Option<String>,
    #[serde(deserialize_with = "text")]
    pub name: String,
    /// As people read it: demangled for C++ and Rust.
    #[serde(deserialize_with = "text")]
    pub function: String,
    /// As the object files name it (the same as `function` for C).
    #[serde(deserialize_with = "text")]
    pub symbol: String,
    pub func_offset: u64,
    pub nop: bool,
}

/// What `bootprof list --json` printed.
#[derive(Debug, Clone, Deserialize)]
pub struct Listing {
    pub count: u64,
    pub nop_ok: u64,
    pub sites: Vec<Site>,
    /// The command and its output, for messages.
    #[serde(skip)]
    pub out: String,
}

/// A string, `null` read as empty (`function` is `null` for a site outside any symbol).
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A string or `null`. Through `deserialize_with` the member is required: serde's derive would
/// otherwise take a missing `Option` as `None`.
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::deserialize(d)
}

impl Listing {
    /// The sites as `(kind, form, function symbol, func_offset)`, sorted: what two builds of the
    /// same objects must agree on.
    pub fn identities(&self) -> Vec<(String, String, String, u64)> {
        let mut v: Vec<_> = self
            .sites
            .iter()
            .map(|s| {
                (
                    s.kind.clone(),
                    s.form.clone(),
                    s.symbol.clone(),
                    s.func_offset,
                )
            })
            .collect();
        v.sort();
        v
    }
}

/// Reads a listing. The document and each site must be JSON objects (serde's derive would also
/// take an array of the members' values).
fn parse_listing(text: &str) -> Result<Listing, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let objects = v.is_object()
        && v.get("sites")
            .and_then(Value::as_array)
            .is_some_and(|sites| sites.iter().all(Value::is_object));
    if !objects {
        return Err("the listing or a site is not an object".into());
    }
    Listing::deserialize(&v).map_err(|e| e.to_string())
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
    let mut listing =
        parse_listing(&out.stdout).unwrap_or_else(|e| panic!("bad listing ({e}): {out}"));
    listing.out = out.to_string();
    (listing, out)
}

#[test]
fn listing_reads_the_documented_example() {
    // DESIGN.md's example as a hook (null provider and function), with an escaped quote and
    // members the listing does not read.
    let doc = r#"{"file": "a\"b", "count": 1, "nop_ok": 1, "sites": [{"address": 4409,
        "file_offset": 4409, "kind": "probe", "form": "call", "len": 5, "provider": null,
        "name": "st\"art", "function": null, "symbol": null, "func_offset": 20, "nop": true,
        "x": [], "y": {}, "z": -1.5e3}]}"#;
    let listing = parse_listing(doc).unwrap();
    assert_eq!((listing.count, listing.nop_ok), (1, 1));
    assert_eq!(
        listing.sites,
        vec![Site {
            address: 4409,
            file_offset: 4409,
            kind: "probe".into(),
            form: "call".into(),
            len: 5,
            provider: None,
            name: "st\"art".into(),
            function: String::new(),
            symbol: String::new(),
            func_offset: 20,
            nop: true,
        }]
    );
    // A member missing or of the wrong type, or no objects, is an error.
    assert!(parse_listing(&doc.replace(r#""provider": null,"#, "")).is_err());
    assert!(parse_listing(&doc.replace(r#""count": 1"#, r#""count": 1.5"#)).is_err());
    assert!(parse_listing(&doc.replace(r#""nop": true"#, r#""nop": 1"#)).is_err());
    assert!(parse_listing("[1, 1, []]").is_err());
    assert!(parse_listing("{").is_err());
    assert!(parse_listing("[1,]").is_err());
}
