//! Links whose inputs cannot give what was asked: a static library without device code, machine
//! code for another architecture, inputs that define no kernel. Each says what is wrong instead
//! of succeeding with an empty cubin or passing on nvJitLink's "bad input". Needs NVRTC, nvJitLink
//! and a C compiler (`cc`, for a host object).

mod common;
mod hostile;

use hostile::{stderr, words, Fixture};

/// A static library holding one host object without device code, built with `cc` and `ar`.
fn host_library(fixture: &Fixture) -> &'static str {
    std::fs::write(fixture.path("f.c"), "int f(void) { return 1; }\n").unwrap();
    for (program, args) in [
        ("cc", &["-c", "f.c", "-o", "f.o"][..]),
        ("ar", &["rcs", "libf.a", "f.o"]),
    ] {
        let status = std::process::Command::new(program)
            .args(args)
            .current_dir(fixture.dir.path())
            .status()
            .unwrap_or_else(|error| panic!("{program}: {error}"));
        assert!(status.success(), "{program} {args:?}");
    }
    "libf.a"
}

#[test]
fn a_static_library_without_device_code_is_refused_naming_its_members() {
    let fixture = Fixture::new();
    let library = host_library(&fixture);
    for args in [
        &["link", library, "--arch", "sm_90", "-o", "empty.cubin"][..],
        &[
            "link",
            "kernel.ltoir",
            library,
            "--lto",
            "--arch",
            "sm_90",
            "-o",
            "empty.cubin",
        ],
    ] {
        let output = fixture.output(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
        let text = stderr(&output);
        assert!(
            text.contains("libf.a holds no device code: none of its 1 member(s)")
                && text.contains("f.o: ")
                && !text.contains("-rdc"),
            "{args:?}: {text}"
        );
        assert!(
            !fixture.path("empty.cubin").exists(),
            "{args:?} wrote a cubin"
        );
    }
    let json = fixture.output(&[
        "link", library, "--arch", "sm_90", "--json", "-o", "e.cubin",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("holds no device code"),
        "{report}"
    );
}

#[test]
fn machine_code_for_another_architecture_says_the_architectures_differ() {
    let fixture = Fixture::new();
    let compiled = fixture.output(&words(
        "compile kernel.cu step.cu --arch sm_90 --rdc -o rdc/",
    ));
    assert!(compiled.status.success(), "{compiled:?}");
    let output = fixture.output(&words(
        "link rdc/kernel.cubin rdc/step.cubin --arch sm_80 -o x.cubin",
    ));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stderr(&output);
    assert!(
        text.contains(
            "rdc/kernel.cubin is machine code (SASS) for sm_90, and the link is for sm_80: SASS \
             links only into its own architecture"
        ) && !text.contains("bad input"),
        "{text}"
    );
    let same = fixture.output(&words(
        "link rdc/kernel.cubin rdc/step.cubin --arch sm_90 -o x.cubin",
    ));
    assert!(same.status.success(), "{same:?}");
}

#[test]
fn a_link_without_kernels_blames_rdc_only_when_an_input_had_some() {
    let fixture = Fixture::new();
    let compiled = fixture.output(&words("compile step.cu --arch sm_90 --rdc -o step.cubin"));
    assert!(compiled.status.success(), "{compiled:?}");
    let output = fixture.output(&words("link step.cubin --arch sm_90 -o functions.cubin"));
    assert!(output.status.success(), "{output:?}");
    let text = stderr(&output);
    assert!(
        text.contains("the linked cubin holds no kernel: no input defines one")
            && !text.contains("-rdc"),
        "{text}"
    );
}
