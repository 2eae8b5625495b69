//! A CMake project (`tests/sources/cmake-project`) linked through bootprof-link with
//! `-DCMAKE_C_LINKER_LAUNCHER=<bootprof-link>`: the executable's table holds the sites of its
//! object, they all hold their NOP, and it runs.

use crate::json::list;
use crate::objdump::sites_in_objects;
use crate::util::{cmd, link_bin, require, run, source_dir, TempDir};

#[test]
fn cmake_linker_launcher() {
    require!("cmake", "make", "cc", "objdump");
    let t = TempDir::new("cmake");
    let build = t.join("build");
    let mut configure = cmd(
        "cmake",
        ["-G", "Unix Makefiles", "-DCMAKE_BUILD_TYPE=Release"],
    );
    configure
        .arg(format!("-DCMAKE_C_LINKER_LAUNCHER={}", link_bin()))
        .arg("-S")
        .arg(source_dir("cmake-project"))
        .arg("-B")
        .arg(&build)
        .env("CC", "cc");
    run(&mut configure).ok();
    let built = run(cmd(
        "cmake",
        ["--build".as_ref(), build.as_os_str(), "--verbose".as_ref()],
    ));
    built.no_panic();
    let built = built.ok();
    assert!(
        built.stdout.contains(link_bin()),
        "the link did not go through bootprof-link:{built}"
    );

    let app = build.join("probed_app");
    let ran = run(&mut cmd(&app, [""; 0])).ok();
    assert_eq!(ran.stdout, "cmake sum 55\n");

    let object = build.join("CMakeFiles/probed_app.dir/main.c.o");
    let mut want: Vec<_> = sites_in_objects(&[object])
        .iter()
        .map(|e| e.identity())
        .collect();
    want.sort();
    let (listing, out) = list(&app);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(want.len(), 3, "the object's sites: {want:?}");
    assert_eq!(listing.identities(), want, "{}", listing.out);
    assert!(listing.sites.iter().all(|s| s.nop), "{}", listing.out);
}
