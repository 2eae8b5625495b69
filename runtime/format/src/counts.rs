//! Hit-count tables: takes sites' hits (the counts a process wrote with `BOOTPROF_COUNT=1`);
//! hands on the text table that `bootprof run --count`, `bootprof report --format counts` and
//! the runtime (counting without a session, at exit) print: one definition, so all three agree.
//!
//! ```text
//!      hits  kind        site
//!    400000  probe       count:hot
//!        12  fentry      parse_args
//! ```
//!
//! A row is a site as patterns name it: `provider:name` for probes, the function for hooks
//! (several sites of one name, such as the guard and the call of one `BOOTPROF_PROBE`, or two
//! calls of one probe, are one row). Rows are sorted by hits, most first, then by name.

extern crate alloc;
use crate::Kind;
use alloc::string::String;
use alloc::vec::Vec;

/// One row of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Hits.
    pub hits: u64,
    /// The kind of site.
    pub kind: Kind,
    /// The site's name (see [`site_name`]).
    pub site: String,
}

/// A site's name in a table: `provider:name` for probes, the function for hooks; for the
/// `BOOTPROF_ENTER()`/`EXIT()` annotations (provider `bootprof`) their function follows, since
/// the region they mark is named after it.
pub fn site_name(kind: Kind, provider: &str, name: &str, function: &str) -> String {
    if kind.is_hook() {
        String::from(function)
    } else if provider == "bootprof" && !function.is_empty() {
        alloc::format!("{provider}:{name} ({function})")
    } else {
        alloc::format!("{provider}:{name}")
    }
}

/// The rows of `counts`, those of one site name and kind added up, sorted by hits (most first),
/// then by kind and name.
pub fn rows(counts: impl IntoIterator<Item = Row>) -> Vec<Row> {
    let mut rows: Vec<Row> = counts.into_iter().collect();
    crate::order::sort_by(&mut rows, |a, b| (&a.site, a.kind) < (&b.site, b.kind));
    rows.dedup_by(|later, kept| {
        let same = later.site == kept.site && later.kind == kept.kind;
        if same {
            kept.hits = kept.hits.saturating_add(later.hits);
        }
        same
    });
    crate::order::sort_by(&mut rows, |a, b| {
        (core::cmp::Reverse(a.hits), &a.site, a.kind)
            < (core::cmp::Reverse(b.hits), &b.site, b.kind)
    });
    rows
}

/// Appends the table of `rows` (from [`rows`]) to `out`, every line after `indent`: a heading,
/// then a line per row.
pub fn write_table(rows: &[Row], indent: &str, out: &mut String) {
    let width = width(rows);
    write_heading(width, indent, out);
    write_rows(rows, width, indent, out);
}

/// The width of the hits column that holds every count of `rows`.
pub fn width(rows: &[Row]) -> usize {
    rows.iter()
        .map(|r| decimal_digits(r.hits))
        .max()
        .unwrap_or(0)
        .max(9)
}

/// Appends the heading of a table whose hits column is `width` wide.
pub fn write_heading(width: usize, indent: &str, out: &mut String) {
    use core::fmt::Write;
    // Into a String: nothing can fail.
    let _ = writeln!(out, "{indent}{:>width$}  {:<10}  site", "hits", "kind");
}

/// Appends a line per row, the hits column `width` wide (at least [`width`] of the rows).
pub fn write_rows(rows: &[Row], width: usize, indent: &str, out: &mut String) {
    use core::fmt::Write;
    for r in rows {
        let _ = writeln!(
            out,
            "{indent}{:>width$}  {:<10}  {}",
            r.hits,
            r.kind.name(),
            r.site
        );
    }
}

fn decimal_digits(v: u64) -> usize {
    v.checked_ilog10().map_or(1, |d| d as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn row(hits: u64, kind: Kind, site: &str) -> Row {
        Row {
            hits,
            kind,
            site: site.to_string(),
        }
    }

    #[test]
    fn rows_of_one_name_add_up_and_sort_by_hits_then_name() {
        let got = rows([
            row(5, Kind::Probe, "app:b"),
            row(0, Kind::Probe, "app:tick"),
            row(7, Kind::Fentry, "main"),
            row(5, Kind::Probe, "app:a"),
            row(9, Kind::Probe, "app:tick"),
            row(u64::MAX, Kind::CygEnter, "f"),
            row(1, Kind::CygEnter, "f"),
            row(3, Kind::CygExit, "f"),
        ]);
        assert_eq!(
            got,
            [
                row(u64::MAX, Kind::CygEnter, "f"),
                row(9, Kind::Probe, "app:tick"),
                row(7, Kind::Fentry, "main"),
                row(5, Kind::Probe, "app:a"),
                row(5, Kind::Probe, "app:b"),
                row(3, Kind::CygExit, "f"),
            ]
        );
    }

    #[test]
    fn the_table_aligns_its_columns_to_the_widest_count() {
        let mut out = String::new();
        write_table(
            &[
                row(12_345_678_901, Kind::IsEnabled, "a:b"),
                row(0, Kind::Fentry, "main"),
            ],
            "  ",
            &mut out,
        );
        assert_eq!(
            out,
            concat!(
                "         hits  kind        site\n",
                "  12345678901  is-enabled  a:b\n",
                "            0  fentry      main\n",
            )
        );
        assert_eq!(
            site_name(Kind::Probe, "bootprof", "enter", "load"),
            "bootprof:enter (load)"
        );
        assert_eq!(site_name(Kind::Mcount, "", "mcount", "load"), "load");
    }
}
