//! The shape of the code, checked: in each library crate the modules form layers (no module
//! reaches, directly or through others, one that reaches back to it), so a phase never calls
//! back up and shared pieces sit below their users.

use crate::util::repo_root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The crates whose `src/` is checked.
const CRATES: [&str; 4] = ["rewriter", "runtime", "runtime/report", "runtime/format"];

/// Each top-level module of the crate at `src` (a `foo.rs` or a `foo/` directory; binaries and
/// the crate root left out) and the modules of the same crate it names as `crate::module`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.ends_with("bin") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let module = rel
            .iter()
            .next()
            .unwrap()
            .to_string_lossy()
            .replace(".rs", "");
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let uses = graph.entry(module).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let mut rest = code;
            while let Some(at) = rest.find("crate::") {
                rest = &rest[at + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // `use crate::{a, b::c}`: every first segment.
                    let inner = group.split('}').next().unwrap_or("");
                    for item in inner.split(',') {
                        let name = item.trim().split("::").next().unwrap_or("").trim();
                        uses.insert(name.to_string());
                    }
                } else {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    uses.insert(name);
                }
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for (module, uses) in graph.iter_mut() {
        uses.retain(|u| modules.contains(u) && u != module);
    }
    graph
}

/// A cycle of `graph`, if it has one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut cycle = path[at..].to_vec();
            cycle.push(module.to_string());
            return Some(cycle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in &graph[module] {
            if let Some(c) = visit(graph, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    for krate in CRATES {
        let graph = imports(&repo_root().join(krate).join("src"));
        assert!(graph.len() > 1, "{krate}: no modules found");
        if let Some(c) = cycle(&graph) {
            panic!("{krate}: modules import each other: {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    // The check above must be able to fail.
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, u)| (m.to_string(), u.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(cycle(&graph).unwrap().join(" -> "), "a -> b -> c -> a");
}
