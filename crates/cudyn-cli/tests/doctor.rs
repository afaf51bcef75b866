//! `cudyn doctor` as a user runs it.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::cudyn;

use serde_json::Value;

/// Runs `cudyn doctor --json` with `extra` arguments and parses what it prints.
fn doctor_json(command: &mut Command, extra: &[&str]) -> (Output, Value) {
    let output = command
        .args(["doctor", "--json"])
        .args(extra)
        .output()
        .expect("cudyn runs");
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (output, json)
}

fn component<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["report"]["components"]
        .as_array()
        .expect("components")
        .iter()
        .find(|c| c["component"] == name)
        .unwrap_or_else(|| panic!("no component {name} in {json}"))
}

#[test]
fn hidden_libraries_fail_with_every_place_listed() {
    let empty = tempfile::tempdir().unwrap();
    let output = cudyn()
        .arg("doctor")
        .env("CUDYN_LIBRARY_PATH", empty.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    for soname in [
        "libcuda.so.1",
        "libcudart.so.13",
        "libnvrtc.so.13",
        "libnvJitLink.so.13",
    ] {
        assert!(text.contains(soname), "{soname} missing from:\n{text}");
    }
    assert!(text.contains(&empty.path().display().to_string()), "{text}");
    assert!(text.contains("exclusive"), "{text}");
    assert!(text.contains("Problems"), "{text}");
}

#[test]
fn hidden_libraries_in_json() {
    let empty = tempfile::tempdir().unwrap();
    let (output, json) = doctor_json(cudyn().env("CUDYN_LIBRARY_PATH", empty.path()), &[]);
    assert_eq!(output.status.code(), Some(1));
    for name in ["driver", "runtime", "nvrtc", "nvjitlink", "nvfatbin"] {
        let c = component(&json, name);
        assert_eq!(c["not_found"], true, "{c}");
        assert!(c["found"].is_null(), "{c}");
    }
    assert_eq!(json["problems"].as_array().unwrap().len(), 3, "{json}");
}

#[test]
fn reports_cudas_headers_beside_nvrtc_in_text_and_json() {
    let (output, json) = doctor_json(&mut cudyn(), &[]);
    assert_eq!(output.status.code(), Some(0), "{json:#}");
    let headers = &json["report"]["headers"];
    let nvrtc = &component(&json, "nvrtc")["found"];
    assert_eq!(headers["nvrtc_version"], nvrtc["version"], "{headers:#}");
    let cuda = PathBuf::from(headers["cuda"]["folder"].as_str().unwrap());
    let cccl = PathBuf::from(headers["cccl"]["folder"].as_str().unwrap());
    assert!(cuda.join("cuda_fp16.h").is_file(), "{headers:#}");
    assert!(cccl.join("cuda/std/complex").is_file(), "{headers:#}");
    assert_eq!(
        headers["cuda"]["cuda_version"], nvrtc["version"],
        "{headers:#}"
    );
    let nvrtc_installation = PathBuf::from(nvrtc["path"].as_str().unwrap());
    let installation = nvrtc_installation.parent().unwrap().parent().unwrap();
    assert_eq!(cuda, installation.join("include"), "taken beside NVRTC");
    let warnings = json["report"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .all(|w| w["id"] != "headers-differ-from-nvrtc" && w["id"] != "headers-not-found"),
        "{warnings:?}"
    );

    let text = cudyn().arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("CUDA headers"), "{text}");
    assert!(text.contains(&*cccl.to_string_lossy()), "{text}");
}

#[test]
fn finds_the_compiler_toolchain() {
    let (output, json) = doctor_json(&mut cudyn(), &[]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "doctor failed; run scripts/cuda-wheels and activate its environment:\n{json:#}"
    );
    for name in ["runtime", "nvrtc", "nvjitlink"] {
        let found = &component(&json, name)["found"];
        let major = found["version"]["major"].as_u64().unwrap_or(0);
        assert!(major >= 12, "{name}: {found}");
        assert!(
            std::path::Path::new(found["path"].as_str().unwrap()).is_file(),
            "{found}"
        );
    }
    // Where the project's scripts set things up (a wheels venv, no toolkit variables), the
    // toolchain must come from the wheels.
    let wheels = std::env::var_os("VIRTUAL_ENV").map(PathBuf::from);
    let toolkit_vars = ["CUDA_PATH", "CUDA_HOME", "CUDYN_LIBRARY_PATH"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if let (Some(venv), false) = (wheels, toolkit_vars) {
        for name in ["runtime", "nvrtc", "nvjitlink"] {
            let found = &component(&json, name)["found"];
            assert_eq!(found["origin"], "python_wheel", "{name}: {found}");
            assert!(found["path"]
                .as_str()
                .unwrap()
                .starts_with(&*venv.to_string_lossy()));
        }
    }
    // Without a driver there is no GPU, and the report says why.
    if component(&json, "driver")["not_found"] == true {
        assert!(json["report"]["devices"].as_array().unwrap().is_empty());
        let why = json["report"]["devices_error"].as_str().unwrap();
        assert!(why.contains("libcuda.so.1"), "{why}");
    }
}

#[test]
#[ignore = "gpu: needs the NVIDIA driver and a GPU"]
fn finds_the_driver_and_the_gpu() {
    let (output, json) = doctor_json(&mut cudyn(), &["--require-gpu"]);
    assert_eq!(output.status.code(), Some(0), "{json:#}");
    let driver = &component(&json, "driver")["found"];
    assert!(
        driver["version"]["major"].as_u64().unwrap() >= 12,
        "{driver}"
    );
    let devices = json["report"]["devices"].as_array().unwrap();
    assert!(!devices.is_empty(), "{json:#}");
    for device in devices {
        assert!(!device["name"].as_str().unwrap().is_empty());
        assert!(
            device["compute_capability"][0].as_u64().unwrap() >= 5,
            "{device}"
        );
        assert!(
            device["total_memory"].as_u64().unwrap() > 1 << 30,
            "{device}"
        );
    }
}
