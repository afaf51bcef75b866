//! With every CUDA library hidden, each entry point fails with an error that lists where cudyn
//! looked, and nothing panics.
//!
//! One test in its own binary: the search path is process-wide and fixed at the first opening.

use cudyn::{Backend, Component, Device, Error, Library, ToolchainReport};

/// Whole, valid PTX with one kernel, written out so that no compiler is needed.
const NOOP_PTX: &str = "\
.version 8.0
.target sm_90
.address_size 64

.visible .entry noop()
{
\tret;
}
";

#[test]
fn every_entry_point_reports_where_it_looked() {
    let empty = tempfile::tempdir().unwrap();
    let folder = empty.path().display().to_string();
    cudyn::set_library_path([empty.path()]).unwrap();

    type Opener = fn() -> Option<Error>;
    let openers: [(Component, Opener); 5] = [
        (Component::Driver, || cudyn::sys::driver().err()),
        (Component::Runtime, || cudyn::sys::runtime().err()),
        (Component::Nvrtc, || cudyn::sys::nvrtc().err()),
        (Component::NvJitLink, || cudyn::sys::nvjitlink().err()),
        (Component::NvFatbin, || cudyn::sys::nvfatbin().err()),
    ];
    for (component, open) in openers {
        let error = open().unwrap_or_else(|| panic!("{component} opened from an empty folder"));
        let Error::LibraryNotFound {
            component: reported,
            searched,
        } = &error
        else {
            panic!("{component}: expected LibraryNotFound, got {error:?}");
        };
        assert_eq!(*reported, component);
        let text = error.to_string();
        assert!(text.contains(&folder), "{component}: {text}");
        assert!(text.contains(component.sonames()[0]), "{component}: {text}");
        assert!(
            searched.iter().any(|place| place.contains("exclusive")),
            "{component}: the override is said to be exclusive: {searched:?}"
        );
    }

    let device_error = Device::count().expect_err("no driver, no devices");
    assert!(
        matches!(
            device_error,
            Error::LibraryNotFound {
                component: Component::Driver,
                ..
            }
        ),
        "{device_error:?}"
    );

    // Loading valid device code without a driver names the driver and where it was looked for,
    // whichever API is asked to load it: no library can live without the driver.
    let ptx_file = empty.path().join("noop.ptx");
    std::fs::write(&ptx_file, NOOP_PTX).unwrap();
    for (how, loaded) in [
        ("default", Library::load(NOOP_PTX)),
        ("from a file", Library::from_file(&ptx_file)),
        (
            "runtime",
            Library::loader().backend(Backend::Runtime).load(NOOP_PTX),
        ),
        (
            "driver",
            Library::loader().backend(Backend::Driver).load(NOOP_PTX),
        ),
    ] {
        let error = loaded.expect_err("no driver, no library");
        assert!(
            matches!(
                error,
                Error::LibraryNotFound {
                    component: Component::Driver,
                    ..
                }
            ),
            "{how}: expected the driver to be reported missing, got {error:?}"
        );
        assert!(error.to_string().contains(&folder), "{how}: {error}");
    }

    let report = ToolchainReport::probe();
    assert!(report
        .components
        .iter()
        .all(|c| c.found.is_none() && c.not_found));
    assert!(report.devices.is_empty());
    let problems = report.problems(false);
    for required in [Component::Runtime, Component::Nvrtc, Component::NvJitLink] {
        assert!(
            problems.iter().any(|p| p.starts_with(required.name())),
            "{required} missing is a problem: {problems:?}"
        );
    }
    assert!(
        !problems
            .iter()
            .any(|p| p.starts_with(Component::Driver.name())),
        "a machine without a driver is fine unless a GPU is required: {problems:?}"
    );
    assert!(report.problems(true).len() > problems.len());

    let frozen = cudyn::set_library_path(["/elsewhere"]).expect_err("libraries were opened");
    assert!(
        matches!(frozen, Error::SearchPathFrozen { .. }),
        "{frozen:?}"
    );
}
