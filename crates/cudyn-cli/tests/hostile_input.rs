//! Inputs without bounds, and inputs that are not what a command reads: `/dev/zero`, FIFOs,
//! folders, large sparse files, endless standard input, NUL bytes, binary sources. Every case
//! ends within seconds and a bounded amount of memory, measured on the child itself, with an
//! error that names the input and says what to do. Needs NVRTC and nvJitLink
//! (scripts/cuda-wheels, then activate the venv).

mod common;
mod hostile;

use std::ffi::CString;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use hostile::{measure, stderr, words, Fixture};

/// The most memory a refused input may cost the command.
const MAX_RSS: u64 = 256 << 20;
/// The longest a refused input may take.
const MAX_TIME: Duration = Duration::from_secs(10);

/// Each command, with `{}` where the hostile input goes.
const READERS: &[&str] = &[
    "inspect '{}'",
    "inspect --json '{}'",
    "compile '{}' --arch sm_90 -o out.cubin",
    "link '{}' step.ltoir --lto --arch sm_90 -o out.cubin",
    "run '{}' k --check --grid 1 --block 1 --arg buf:f32:1",
    "run k.cubin k --check --grid 1 --block 1 --arg 'buf:f32:@{}'",
];

fn with_input(reader: &str, input: &str) -> Vec<String> {
    hostile::words(&reader.replace("{}", input))
}

fn mkfifo(path: &Path) {
    let name = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates the file.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

/// A sparse file of `size` bytes of zeros, taking no space on disk.
fn sparse(path: &Path, size: u64) {
    std::fs::File::create(path).unwrap().set_len(size).unwrap();
}

/// Runs every reader on `input` and checks that each fails with status 1 within bounds, its
/// error containing `says`.
fn refused_everywhere(fixture: &Fixture, input: &str, says: &str) {
    for reader in READERS {
        let args = with_input(reader, input);
        let command = fixture.cudyn(&args);
        let measured = measure(command, MAX_TIME);
        let case = format!("{args:?}");
        assert!(
            !measured.stderr.contains("panicked"),
            "{case}: {measured:?}"
        );
        assert_eq!(measured.status, Some(1), "{case}: {measured:?}");
        assert!(
            measured.stderr.contains(says),
            "{case}: {}",
            measured.stderr
        );
        assert!(
            measured.max_rss_bytes < MAX_RSS,
            "{case} held {} MiB",
            measured.max_rss_bytes >> 20
        );
    }
}

#[test]
fn devices_fifos_and_folders_are_refused_before_a_byte_is_read() {
    let fixture = Fixture::new();
    mkfifo(&fixture.path("fifo"));
    std::fs::create_dir(fixture.path("folder")).unwrap();
    refused_everywhere(
        &fixture,
        "/dev/zero",
        "/dev/zero is a character device, not a regular file",
    );
    refused_everywhere(&fixture, "/dev/urandom", "is a character device");
    refused_everywhere(&fixture, "/dev/null", "is a character device");
    refused_everywhere(
        &fixture,
        "fifo",
        "fifo is a FIFO (a named pipe), not a regular file",
    );
    refused_everywhere(&fixture, "folder", "folder is a folder, not a file");
    refused_everywhere(&fixture, "/proc/self/fd/0", "not a regular file");
    refused_everywhere(&fixture, "missing.bin", "cannot read missing.bin");
}

#[test]
fn files_beyond_the_limit_are_refused_by_their_size_and_the_limit_is_overridable() {
    let fixture = Fixture::new();
    // Past the default limit of 1 GiB; sparse, so it costs no disk.
    sparse(&fixture.path("huge"), 5 << 30);
    refused_everywhere(
        &fixture,
        "huge",
        "huge is 5368709120 bytes, more than the limit of 1073741824 bytes on one input",
    );
    let cubin_size = std::fs::metadata(fixture.path("k.cubin")).unwrap().len();
    let small = fixture.output(&["inspect", "--max-input-bytes", "1K", "k.cubin"]);
    assert_eq!(small.status.code(), Some(1), "{small:?}");
    assert!(
        stderr(&small).contains(&format!(
            "k.cubin is {cubin_size} bytes, more than the limit of 1024 bytes on one input: if it \
             is the right file, raise the limit with --max-input-bytes"
        )),
        "{small:?}"
    );
    let raised = fixture.output(&["inspect", "--max-input-bytes", "1M", "k.cubin"]);
    assert!(raised.status.success(), "{raised:?}");
    for bad in ["lots", "-1", "1T", ""] {
        let output = fixture.output(&["inspect", "--max-input-bytes", bad, "k.cubin"]);
        assert_eq!(
            output.status.code(),
            Some(2),
            "--max-input-bytes {bad:?}: {output:?}"
        );
    }
}

#[test]
fn a_large_sparse_file_is_judged_by_its_first_bytes() {
    let fixture = Fixture::new();
    // Within the limit: only its head is read before it is refused.
    sparse(&fixture.path("zeros"), 1 << 30);
    for reader in READERS {
        let args = with_input(reader, "zeros");
        let command = fixture.cudyn(&args);
        let measured = measure(command, MAX_TIME);
        let case = format!("{args:?}");
        if args.iter().any(|arg| arg.contains('@')) {
            // A buffer's contents may be anything: 1 GiB of zeros is a valid buffer, read
            // whole, and --check then stops.
            assert_eq!(measured.status, Some(0), "{case}: {measured:?}");
            continue;
        }
        assert_eq!(measured.status, Some(1), "{case}: {measured:?}");
        assert!(
            measured
                .stderr
                .contains("zeros is not device code: it starts with the bytes 00 00")
                || measured
                    .stderr
                    .contains("zeros is not CUDA C++ source: it holds a NUL byte at byte 0"),
            "{case}: {}",
            measured.stderr
        );
        assert!(
            measured.max_rss_bytes < MAX_RSS,
            "{case}: {} MiB",
            measured.max_rss_bytes >> 20
        );
        assert!(
            measured.elapsed < Duration::from_secs(5),
            "{case}: {:?}",
            measured.elapsed
        );
    }
}

/// Runs `cudyn ARGS...` with `input` written to its standard input by a thread.
fn with_stdin(fixture: &Fixture, line: &str, input: Vec<u8>) -> std::process::Output {
    let args = hostile::words(line);
    let mut child = fixture
        .cudyn(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        // The command may stop reading early: a broken pipe here is expected.
        let _ = stdin.write_all(&input);
    });
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    hostile::assert_no_panic(&output, &format!("{line} < (stdin)"));
    output
}

#[test]
fn a_dash_reads_standard_input_once_and_within_the_limit() {
    let fixture = Fixture::new();
    let cubin = std::fs::read(fixture.path("k.cubin")).unwrap();
    let source = std::fs::read(fixture.path("k.cu")).unwrap();
    let inspected = with_stdin(&fixture, "inspect --json -", cubin.clone());
    assert!(inspected.status.success(), "{inspected:?}");
    let json: serde_json::Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(json[0]["file"], "-");
    assert_eq!(json[0]["inspection"]["kind"], "cubin");

    let compiled = with_stdin(
        &fixture,
        "compile - --arch sm_90 -o from_stdin.cubin",
        source.clone(),
    );
    assert!(compiled.status.success(), "{compiled:?}");
    assert!(fixture.path("from_stdin.cubin").is_file());
    let to_stdout = with_stdin(&fixture, "compile - --arch sm_90 -o -", source.clone());
    assert!(
        to_stdout.status.success() && to_stdout.stdout.starts_with(b"\x7fELF"),
        "{to_stdout:?}"
    );
    let linked = with_stdin(
        &fixture,
        "link - step.ltoir --lto --arch sm_90 -o stdin.cubin",
        std::fs::read(fixture.path("kernel.ltoir")).unwrap(),
    );
    assert!(linked.status.success(), "{linked:?}");

    // Usage errors: standard input twice, and no name to write an output beside.
    let twice = with_stdin(&fixture, "inspect - -", cubin.clone());
    assert_eq!(twice.status.code(), Some(2), "{twice:?}");
    assert!(
        stderr(&twice).contains("standard input (-) is named twice"),
        "{twice:?}"
    );
    for line in ["compile - --arch sm_90", "compile - --arch sm_90 -o dir/"] {
        let unnamed = with_stdin(&fixture, line, source.clone());
        assert_eq!(unnamed.status.code(), Some(2), "{line}: {unnamed:?}");
        assert!(
            stderr(&unnamed).contains("name the output with -o FILE"),
            "{unnamed:?}"
        );
        assert!(!fixture.path("dir").exists(), "{line} made a folder");
    }

    // Endless input: zeros are refused by their head, text by the limit.
    let zeros = with_stdin(&fixture, "inspect -", vec![0; 8 << 20]);
    assert_eq!(zeros.status.code(), Some(1), "{zeros:?}");
    assert!(
        stderr(&zeros).contains("standard input is not device code: it starts with the bytes 00"),
        "{zeros:?}"
    );
    let text = with_stdin(
        &fixture,
        "compile - --arch sm_90 -o x.cubin --max-input-bytes 1M",
        vec![b'x'; 8 << 20],
    );
    assert_eq!(text.status.code(), Some(1), "{text:?}");
    assert!(
        stderr(&text).contains("standard input holds more than the limit of 1048576 bytes"),
        "{text:?}"
    );
    let nul = with_stdin(
        &fixture,
        "compile - --arch sm_90 -o x.cubin",
        b"__global__ void k() {}\0".to_vec(),
    );
    assert!(
        stderr(&nul)
            .contains("standard input is not CUDA C++ source: it holds a NUL byte at byte 22"),
        "{nul:?}"
    );
}

#[test]
fn a_source_with_a_nul_byte_or_binary_bytes_is_named_with_the_offset_not_printed() {
    let fixture = Fixture::new();
    // 1.4 MB of source with a NUL in the middle: the error is one short line.
    let mut big = "// padding\n".repeat(130_000).into_bytes();
    let at = big.len() / 2;
    big[at] = 0;
    big.extend_from_slice(hostile::KERNEL.as_bytes());
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "big.cu",
            big,
            format!("big.cu is not CUDA C++ source: it holds a NUL byte at byte {at}"),
        ),
        (
            "tail.cu",
            [hostile::KERNEL.as_bytes(), b"\0"].concat(),
            format!(
                "tail.cu is not CUDA C++ source: it holds a NUL byte at byte {}",
                hostile::KERNEL.len()
            ),
        ),
        (
            "latin1.cu",
            b"// caf\xe9\n__global__ void k() {}\n".to_vec(),
            "latin1.cu is not CUDA C++ source: it is not UTF-8 text from byte 6".to_owned(),
        ),
        (
            "k.cubin",
            std::fs::read(fixture.path("k.cubin")).unwrap(),
            "k.cubin is not CUDA C++ source: it holds a NUL byte at byte".to_owned(),
        ),
        (
            "kernel.ltoir",
            std::fs::read(fixture.path("kernel.ltoir")).unwrap(),
            "kernel.ltoir is not CUDA C++ source".to_owned(),
        ),
    ];
    for (name, bytes, says) in cases {
        std::fs::write(fixture.path(name), &bytes).unwrap();
        for args in [
            &["compile", name, "--arch", "sm_90", "-o", "out.cubin"][..],
            &[
                "compile",
                name,
                "--arch",
                "sm_90",
                "-o",
                "out.cubin",
                "--json",
            ],
        ] {
            let output = fixture.output(args);
            assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
            let text = format!(
                "{}{}",
                stderr(&output),
                String::from_utf8_lossy(&output.stdout)
            );
            assert!(text.contains(&says), "{args:?}: {text}");
            assert!(
                text.contains(&format!("cudyn inspect {name}")),
                "{args:?}: {text}"
            );
            assert!(text.len() < 2048, "{args:?}: {} bytes of error", text.len());
        }
    }
    // `run` reads a .cu the same way.
    let output = fixture.output(&words(
        "run big.cu k --arch sm_90 --check --grid 1 --block 1",
    ));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr(&output).contains("big.cu is not CUDA C++ source: it holds a NUL byte"),
        "{output:?}"
    );

    // PTX with a NUL inside, and an empty file, for inspect.
    let ptx = std::fs::read(fixture.path("k.ptx")).unwrap();
    let mut cut = ptx.clone();
    cut.insert(ptx.len() / 2, 0);
    std::fs::write(fixture.path("nul.ptx"), cut).unwrap();
    std::fs::write(fixture.path("empty"), b"").unwrap();
    for (file, says) in [
        (
            "nul.ptx",
            "nul.ptx is not device code: it is PTX text with a NUL byte inside it",
        ),
        ("empty", "empty is not device code: it is empty"),
    ] {
        let output = fixture.output(&["inspect", file]);
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(stderr(&output).contains(says), "{file}: {output:?}");
    }
}
