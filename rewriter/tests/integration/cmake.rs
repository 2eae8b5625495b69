//! CMake projects linked through bootprof-link as CMake's linker launcher, which CMake runs as
//! `bootprof-link <compiler> ARGS...`: a C program (`tests/sources/cmake-project`,
//! `CMAKE_C_LINKER_LAUNCHER`), and a C++ shared library with an executable that uses it
//! (`tests/sources/cmake-cxx-project`, `CMAKE_CXX_LINKER_LAUNCHER`, `-pg -mfentry`). Each
//! binary's table holds the sites of its objects, they all hold their NOP, and the programs run;
//! the C++ one with every site enabled, hitting each function as often as the source calls it.

use crate::json::list;
use crate::objdump::sites_in_objects;
use crate::util::{cmd, link_bin, require, run, source_dir, Out, TempDir, BOOTPROF};
use std::path::{Path, PathBuf};

/// Configures `case` with `options` (and bootprof-link as `launcher`, e.g.
/// `CMAKE_CXX_LINKER_LAUNCHER`) into `build`, and builds it verbosely; returns the build's output.
fn cmake_build(case: &str, build: &Path, launcher: &str, options: &[&str]) -> Out {
    let mut configure = cmd("cmake", ["-G", "Unix Makefiles"]);
    configure
        .arg(format!("-D{launcher}={}", link_bin()))
        .args(options)
        .arg("-S")
        .arg(source_dir(case))
        .arg("-B")
        .arg(build)
        .env("CC", "cc")
        .env("CXX", "c++");
    run(&mut configure).ok();
    let built = run(cmd(
        "cmake",
        ["--build".as_ref(), build.as_os_str(), "--verbose".as_ref()],
    ));
    built.no_panic();
    built.ok()
}

/// A site's identity with a C++ constructor's or destructor's base-object symbol (`C2`, `D2`)
/// read as its complete-object one (`C1`, `D1`): gcc emits the two as aliases of one body, and
/// which alias names a site is bootprof-link's choice (the last in the object's symbol table)
/// and objdump's (by its own ordering), not a fact of the site.
fn one_alias(
    (kind, form, symbol, offset): (String, String, String, u64),
) -> (String, String, String, u64) {
    let symbol = symbol.replace("C2E", "C1E").replace("D2E", "D1E");
    (kind, form, symbol, offset)
}

/// `binary`'s listing against the sites objdump finds in `objects`: the same sites, every one
/// with its NOP; returns how many.
fn table_matches_objects(binary: &Path, objects: &[PathBuf]) -> usize {
    let mut want: Vec<_> = sites_in_objects(objects)
        .iter()
        .map(|e| one_alias(e.identity()))
        .collect();
    want.sort();
    let (listing, out) = list(binary);
    assert_eq!(out.code, Some(0), "{out}");
    let mut have: Vec<_> = listing.identities().into_iter().map(one_alias).collect();
    have.sort();
    assert_eq!(have, want, "{}", listing.out);
    assert!(listing.sites.iter().all(|s| s.nop), "{}", listing.out);
    want.len()
}

#[test]
fn cmake_linker_launcher() {
    require!("cmake", "make", "cc", "objdump");
    let t = TempDir::new("cmake");
    let build = t.join("build");
    let built = cmake_build(
        "cmake-project",
        &build,
        "CMAKE_C_LINKER_LAUNCHER",
        &["-DCMAKE_BUILD_TYPE=Release"],
    );
    assert!(
        built.stdout.contains(link_bin()),
        "the link did not go through bootprof-link:{built}"
    );

    let app = build.join("probed_app");
    let ran = run(&mut cmd(&app, [""; 0])).ok();
    assert_eq!(ran.stdout, "cmake sum 55\n");

    let object = build.join("CMakeFiles/probed_app.dir/main.c.o");
    assert_eq!(table_matches_objects(&app, &[object]), 3);
}

/// Hits per function of `bootprof run --count`'s table (its stderr after the heading line), the
/// hits of sites with one name (a COMDAT copy in the library and one in the executable) added.
fn counts_by_function(stderr: &str) -> std::collections::BTreeMap<String, u64> {
    let mut by_function = std::collections::BTreeMap::new();
    let table = stderr.split_once("):\n").map_or("", |(_, t)| t);
    for line in table.lines().skip(1) {
        let mut words = line.split_whitespace();
        let (Some(hits), Some(_kind)) = (words.next(), words.next()) else {
            continue;
        };
        let name = words.collect::<Vec<_>>().join(" ");
        *by_function.entry(name).or_insert(0) += hits.parse::<u64>().unwrap_or(0);
    }
    by_function
}

#[test]
fn cmake_cxx_linker_launcher_links_the_library_and_the_executable() {
    require!("cmake", "make", "c++", "objdump");
    let t = TempDir::new("cmake-cxx");
    let build = t.join("build");
    let built = cmake_build(
        "cmake-cxx-project",
        &build,
        "CMAKE_CXX_LINKER_LAUNCHER",
        // No build type: nothing but these flags, so that -O0 keeps every call a call.
        &[
            "-DCMAKE_BUILD_TYPE=None",
            "-DCMAKE_CXX_FLAGS=-O0 -pg -mfentry",
        ],
    );
    // CMake puts the launcher before the compiler driver, for the shared library and the
    // executable alike.
    for output in ["-o libshapes.so", "-o shapes_app"] {
        assert!(
            built.stdout.lines().any(|l| l.starts_with(link_bin())
                && l.contains(output)
                && l.split_whitespace()
                    .nth(1)
                    .is_some_and(|d| d.ends_with("c++"))),
            "`{output}` not linked by `{} <c++ driver> ...`:{built}",
            link_bin()
        );
    }

    let lib = build.join("libshapes.so");
    let app = build.join("shapes_app");
    let lib_sites =
        table_matches_objects(&lib, &[build.join("CMakeFiles/shapes.dir/shapes.cpp.o")]);
    let app_sites =
        table_matches_objects(&app, &[build.join("CMakeFiles/shapes_app.dir/main.cpp.o")]);
    // The library: both classes' constructors and destructors (Shape's deleting one too),
    // area, make_square, total_twice and its copy of twice; the executable: main and its copy.
    assert_eq!((lib_sites, app_sites), (10, 2));

    let ran = run(&mut cmd(&app, [""; 0])).ok();
    assert_eq!(ran.stdout, "cmake c++ total 28 first 2\n");
    // Every site enabled, in trap mode: the library's sites too, registered with the
    // executable's runtime when it starts.
    let session = t.join("count.session");
    let counted = run(cmd(
        BOOTPROF,
        [
            "run".as_ref(),
            "--count".as_ref(),
            "-o".as_ref(),
            session.as_os_str(),
            "--".as_ref(),
            app.as_os_str(),
        ],
    ))
    .ok();
    assert_eq!(counted.stdout, "cmake c++ total 28 first 2\n");
    let hits = counts_by_function(&counted.stderr);
    for (function, want) in [
        ("main", 1),
        ("geo::make_square(long)", 3),
        ("geo::Square::Square(long)", 3),
        ("geo::total_twice(geo::Shape* const*, int)", 1),
        ("geo::Shape::twice() const", 4),
        ("geo::Square::area() const", 4),
        ("geo::Shape::~Shape()", 3),
    ] {
        assert_eq!(
            hits.get(function).copied(),
            Some(want),
            "{function}:{counted}"
        );
    }
}
