//! With every CUDA library hidden, each entry point fails with an error that lists where cudyn
//! looked, and nothing panics.
//!
//! One test in its own binary: the search path is process-wide and fixed at the first opening.

use cudyn::{Component, Device, Error, ToolchainReport};

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
