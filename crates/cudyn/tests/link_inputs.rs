//! The checks of nvJitLink's inputs before it reads them ([`Linker::add`]): nvJitLink trusts the
//! headers of what it is given (a truncated fatbin made it loop forever, a damaged section header
//! or an attribute naming a symbol past the table's end crashed it), so every input is checked
//! as a load checks an image, relocatable code included.
//!
//! Real relocatable code of every kind (cubins for five architectures, PTX, fatbins, a host
//! object with an `__nv_relfatbin` section, a static library) must link; damaged copies must be
//! refused or linked, and the process must survive every one of them.

mod fixtures;

use std::path::Path;

use cudyn::compile::{Arch, FatbinBuilder, InputKind, LinkOptions, Linked, Output};
use cudyn::sys::locate::Component;
use cudyn::{Error, Image, ImageKind, Program};
use fixtures::damage::{damages, Damage, Depth};

/// A kernel with static shared memory, calling a function of another piece, with `__device__`,
/// `__constant__` and `__managed__` variables and a `printf`: what makes a relocatable cubin's
/// sections and attributes differ from an executable one's.
const KERNEL: &str = r#"
__device__ float twice(float x);
__device__ float table[64];
__constant__ float scale[4];
__managed__ int calls;
extern "C" __global__ void k(float *p, int n) {
  __shared__ float tile[32];
  int i = threadIdx.x;
  tile[i % 32] = p[i];
  __syncthreads();
  if (i < n) p[i] = twice(tile[(i + 1) % 32]) * scale[i % 4] + table[i % 64];
  if (i == 0) { atomicAdd(&calls, 1); printf("k ran\n"); }
}
"#;

/// The piece `KERNEL` calls into.
const HELPER: &str = "__device__ float twice(float x) { return 2 * x; }";

/// The architectures NVRTC 13 compiles for, old and new (sm_100 and later add `.nv.merc.`
/// sections).
const ARCHS: [u32; 5] = [75, 80, 90, 100, 120];

fn arch(sm: u32) -> Arch {
    Arch::new(sm / 10, sm % 10)
}

fn relocatable(source: &str, sm: u32, output: Output) -> Vec<u8> {
    Program::new(source)
        .arch(arch(sm))
        .output(output)
        .relocatable(true)
        .cache(false)
        .compile()
        .expect("NVRTC compiles (run the tests with the CUDA wheels' venv)")
        .into_code()
}

fn options(sm: u32) -> LinkOptions {
    LinkOptions::new().arch(arch(sm)).cache(false)
}

/// Links `inputs` (by kind, bytes and name) for `sm`.
fn link(sm: u32, inputs: &[(InputKind, &[u8], &str)]) -> cudyn::Result<Linked> {
    let mut linker = options(sm).linker()?;
    for &(kind, bytes, name) in inputs {
        linker.add(kind, bytes, name)?;
    }
    linker.finish()
}

/// A fatbin of one relocatable cubin and the PTX of the same source, for `sm`.
fn relocatable_fatbin(sm: u32) -> Vec<u8> {
    let mut fatbin = FatbinBuilder::new().expect("nvFatbin (the CUDA wheels' venv)");
    fatbin
        .add_cubin(&relocatable(KERNEL, sm, Output::Cubin), arch(sm), "kernel")
        .unwrap();
    fatbin
        .add_ptx(&relocatable(KERNEL, sm, Output::Ptx), arch(sm), "kernel")
        .unwrap();
    fatbin.finish().unwrap()
}

fn assert_links_k(linked: &Linked, what: &str) {
    let layout = Image::new(linked.code())
        .and_then(|image| image.param_layout("k"))
        .unwrap_or_else(|error| panic!("{what}: the linked code lacks k: {error}"));
    assert_eq!(layout.len(), 2, "{what}");
}

/// Links the two pieces' relocatable cubins for every architecture of `ARCHS`.
fn every_architecture_links() {
    for sm in ARCHS {
        let kernel = relocatable(KERNEL, sm, Output::Cubin);
        let helper = relocatable(HELPER, sm, Output::Cubin);
        let linked = link(
            sm,
            &[
                (InputKind::Cubin, &kernel, "kernel.cubin"),
                (InputKind::Any, &helper, "helper.cubin"),
            ],
        )
        .unwrap_or_else(|error| panic!("sm_{sm}: {error}"));
        assert_links_k(&linked, &format!("sm_{sm} cubins"));
    }
}

#[test]
fn relocatable_code_of_every_kind_and_architecture_is_linked() {
    every_architecture_links();
    let helper = relocatable(HELPER, 90, Output::Cubin);
    let kernel_90 = relocatable(KERNEL, 90, Output::Cubin);
    let fatbin = relocatable_fatbin(90);
    for (kind, kernel, what) in [
        (
            InputKind::Ptx,
            relocatable(KERNEL, 90, Output::Ptx),
            "kernel.ptx",
        ),
        (InputKind::Fatbin, fatbin.clone(), "kernel.fatbin"),
    ] {
        let inputs = [
            (kind, &kernel[..], what),
            (InputKind::Cubin, &helper, "helper.cubin"),
        ];
        let linked = link(90, &inputs).unwrap_or_else(|error| panic!("{what}: {error}"));
        assert_links_k(&linked, what);
    }

    // As nvcc -rdc embeds it in a host object, and the object in a static library.
    let dir = tempfile::tempdir().unwrap();
    let section = dir.path().join("section.bin");
    std::fs::write(&section, &fatbin).unwrap();
    let object = fixtures::host_object(dir.path(), &section, "__nv_relfatbin");
    let library = dir.path().join("libkernel.a");
    fixtures::run(
        std::process::Command::new("ar")
            .arg("rcs")
            .arg(&library)
            .arg(&object),
    );
    // (nvJitLink takes no code from this object, which lacks the rest of what nvcc writes: the
    // check must let it through, and nvJitLink read it.)
    for (kind, file) in [(InputKind::Object, &object), (InputKind::Library, &library)] {
        let mut linker = options(90).linker().unwrap();
        linker.add_file(kind, file).unwrap();
        linker
            .add(InputKind::Cubin, &helper, "helper.cubin")
            .unwrap();
        linker.finish().unwrap();
    }

    // CUDA's device runtime: relocatable cubins for eleven architectures, sm_75 to sm_121, in an
    // nvcc object in a static library, beside nvJitLink.
    let nvjitlink = cudyn::sys::nvjitlink().expect("nvJitLink (the CUDA wheels' venv)");
    let devrt = nvjitlink.library.path.with_file_name("libcudadevrt.a");
    let mut linker = options(90).linker().unwrap();
    linker.add_file(InputKind::Library, &devrt).unwrap();
    linker
        .add(InputKind::Cubin, &kernel_90, "kernel.cubin")
        .unwrap();
    linker
        .add(InputKind::Cubin, &helper, "helper.cubin")
        .unwrap();
    assert_links_k(&linker.finish().unwrap(), "with libcudadevrt.a");
}

/// What adding `bytes` to a link and finishing it gave: refused by the check, or linked (or
/// refused by nvJitLink, which read them and survived).
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Refused,
    Read,
}

fn add_and_finish(bytes: &[u8], helper: &[u8]) -> Outcome {
    let mut linker = options(90).linker().unwrap();
    match linker.add(InputKind::Any, bytes, "damaged") {
        // A damaged header may also read as machine code of another architecture.
        Err(
            Error::MalformedImage { .. }
            | Error::NotDeviceCode { .. }
            | Error::LinkArchMismatch { .. },
        ) => return Outcome::Refused,
        // nvJitLink read them and refused them itself.
        Err(Error::Cuda(call)) if call.api == Component::NvJitLink => return Outcome::Read,
        Err(other) => panic!("not the error of a damaged input: {other}"),
        Ok(_) => {}
    }
    linker
        .add(InputKind::Cubin, helper, "helper.cubin")
        .unwrap();
    let _ = linker.finish();
    Outcome::Read
}

#[test]
fn damaged_inputs_are_refused_before_nvjitlink_reads_them_or_are_read_safely() {
    let helper = relocatable(HELPER, 90, Output::Cubin);
    for (what, original) in [
        ("relocatable cubin", relocatable(KERNEL, 90, Output::Cubin)),
        ("relocatable fatbin", relocatable_fatbin(90)),
    ] {
        assert_eq!(add_and_finish(&original, &helper), Outcome::Read, "{what}");
        let mut refused = 0;
        let all = damages(&original, 97, Depth::Nested);
        for damage in &all {
            let outcome = add_and_finish(&damage.apply(&original), &helper);
            if let Damage::Truncate(len) = damage {
                // Nothing that ends early is whole: a truncated fatbin made nvJitLink loop
                // forever.
                assert!(
                    *len >= original.len() || outcome == Outcome::Refused,
                    "{what}: {damage} was read"
                );
            }
            refused += usize::from(outcome == Outcome::Refused);
        }
        assert!(
            refused > all.len() / 4,
            "{what}: {refused} of {} refused",
            all.len()
        );
    }
    // What nvJitLink read and refused left it whole: with a `.nv.info` whose sh_info named the
    // section names, the next sm_100 link aborted in free().
    every_architecture_links();
}

/// The `.nv.info` section of a cubin and the symbol count, as the `object` crate reads them.
fn nv_info(cubin: &[u8]) -> (std::ops::Range<usize>, usize) {
    use object::{Object, ObjectSection};
    let file = object::File::parse(cubin).unwrap();
    let section = file
        .section_by_name(".nv.info")
        .expect("a .nv.info section");
    let (offset, size) = section.file_range().unwrap();
    let symbols = file.symbols().count() + 1; // `symbols` leaves out the null symbol
    (offset as usize..(offset + size) as usize, symbols)
}

/// The error of adding `cubin`, which must be refused, to a link as `kernel.cubin`.
fn refusal(cubin: &[u8]) -> Error {
    let mut linker = options(90).linker().unwrap();
    let added = linker
        .add(InputKind::Cubin, cubin, "kernel.cubin")
        .map(drop);
    added.expect_err("a damaged cubin was added")
}

#[test]
fn an_attribute_naming_a_symbol_past_the_table_is_refused() {
    let cubin = relocatable(KERNEL, 90, Output::Cubin);
    let (info, symbols) = nv_info(&cubin);
    // The first attribute of `.nv.info` is a function's register count (EIATTR_REGCOUNT,
    // 0x2f): format, code, length 8, then the function's symbol index and the count.
    assert_eq!(cubin[info.start..info.start + 4], [0x04, 0x2f, 8, 0]);
    let index = info.start + 4;
    let with_index = |symbol: u32| {
        let mut bytes = cubin.clone();
        bytes[index..index + 4].copy_from_slice(&symbol.to_le_bytes());
        bytes
    };
    let last = with_index(symbols as u32 - 1);
    options(90)
        .linker()
        .unwrap()
        .add(InputKind::Cubin, &last, "last")
        .unwrap();
    // Past the end: once the register count of a symbol 0x66000012 crashed nvJitLink.
    for symbol in [symbols as u32, 0x6600_0012] {
        let damaged = with_index(symbol);
        let error = refusal(&damaged);
        let text = error.to_string();
        assert!(
            matches!(
                error,
                Error::MalformedImage {
                    kind: ImageKind::Cubin,
                    ..
                }
            ) && text.contains("kernel.cubin")
                && text.contains(".nv.info")
                && text.contains(&format!("names symbol {symbol} of {symbols}")),
            "{text}"
        );
    }
}

#[test]
fn a_shared_variable_placed_far_past_its_section_is_refused() {
    use object::{Object, ObjectSection, ObjectSymbol};
    // In a relocatable cubin a `__shared__` array's symbols hold its alignment as their value,
    // which nvJitLink places: with byte 3 of that value flipped, a link ran for minutes.
    let cubin = relocatable(KERNEL, 90, Output::Cubin);
    let file = object::File::parse(&cubin[..]).unwrap();
    let shared = file.section_by_name(".nv.shared.k").unwrap().index();
    let table = file
        .section_by_name(".symtab")
        .unwrap()
        .file_range()
        .unwrap()
        .0 as usize;
    let values: Vec<usize> = file
        .symbols()
        .filter(|symbol| symbol.section_index() == Some(shared))
        .map(|symbol| table + symbol.index().0 * 24 + 8)
        .collect();
    assert!(!values.is_empty(), "no symbol in .nv.shared.k");
    for at in values {
        let mut damaged = cubin.clone();
        damaged[at + 3] ^= 0xff;
        let text = refusal(&damaged).to_string();
        assert!(
            text.contains("kernel.cubin") && text.contains("run past the end of section"),
            "{text}"
        );
    }
}

/// Where section `name` of `cubin` is: its bytes, and its header's offset.
fn section(cubin: &[u8], name: &str) -> (std::ops::Range<usize>, usize) {
    use object::{Object, ObjectSection};
    let file = object::File::parse(cubin).unwrap();
    let section = file
        .section_by_name(name)
        .unwrap_or_else(|| panic!("no {name}"));
    let (offset, size) = section.file_range().unwrap_or((0, 0));
    let table = u64::from_le_bytes(cubin[0x28..0x30].try_into().unwrap()) as usize;
    (
        offset as usize..(offset + size) as usize,
        table + section.index().0 * 64,
    )
}

#[test]
fn a_field_nvjitlink_follows_unchecked_is_refused_when_damaged() {
    // Each of these crashed nvJitLink 13.0 (SIGSEGV, SIGFPE) or hung the links of other threads.
    let cubin = relocatable(KERNEL, 90, Output::Cubin);
    let (_, symbols) = nv_info(&cubin);
    let (call_graph, _) = section(&cubin, ".nv.callgraph");
    let (prototypes, _) = section(&cubin, ".nv.prototype");
    let (relocations, _) = section(&cubin, ".rela.text.k");
    let (symbol_table, _) = section(&cubin, ".symtab");
    let (_, note_header) = section(&cubin, ".note.nv.cuinfo");
    let (_, frame_header) = section(&cubin, ".debug_frame");
    let (_, info_header) = section(&cubin, ".nv.info");
    let damages: [(&str, usize, &[u8], &str); 12] = [
        ("OS/ABI", 7, &[0x32], "OS/ABI 0x32"),
        ("top byte of e_flags", 51, &[0x07], "end in a byte (0x7)"),
        (
            "callee",
            call_graph.start + 4,
            &[0x7f, 0, 0, 0x30],
            "names as its callee a symbol that is not a function",
        ),
        // The second call's callee, `twice` (symbol 27), made the undefined variable `__UDT_END`.
        (
            "callee, a variable",
            call_graph.start + 12,
            &[12],
            "names as its callee a symbol that is not a function",
        ),
        // The fifth call's caller, the null symbol (its callee a marker), made a section's.
        (
            "caller",
            call_graph.start + 32,
            &[0x10],
            "names as its caller a symbol that is not a function",
        ),
        (
            "prototype's name",
            prototypes.start + 4,
            &[0xff, 0xff, 0, 0],
            "names a symbol or string",
        ),
        (
            "relocation type",
            relocations.start + 10,
            &[0x38],
            "is none a compiler writes",
        ),
        (
            "symbol's section",
            symbol_table.start + 24 + 6,
            &[0x0e, 0xff],
            "reserved section",
        ),
        (
            "note's type",
            note_header + 4,
            &[0x01, 0, 0, 0x70],
            "not the one its name says",
        ),
        ("alignment", frame_header + 48, &[0], "alignment 0"),
        // Read by nvJitLink, these two broke its state: the next link aborted.
        (
            "attribute list's sh_info",
            info_header + 44,
            &[1],
            "does not name the section its name says",
        ),
        // Symbol 1 is a section's (local, type 3); 10 is an OS-specific type.
        (
            "symbol's type",
            symbol_table.start + 24 + 4,
            &[0x0a],
            "type 10",
        ),
    ];
    for (what, at, bytes, expected) in damages {
        let mut damaged = cubin.clone();
        damaged[at..at + bytes.len()].copy_from_slice(bytes);
        let error = refusal(&damaged);
        let text = error.to_string();
        assert!(
            matches!(error, Error::MalformedImage { .. }) && text.contains(expected),
            "{what}: {text}"
        );
    }
    assert!(symbols > 2);
}

#[test]
fn a_host_object_section_outside_the_file_is_refused_alone_and_in_a_library() {
    // nvJitLink 13.0 crashed on an nvcc object in a static library whose last section header's
    // offset had bytes changed: every section's bytes must lie in the file.
    let dir = tempfile::tempdir().unwrap();
    let section = dir.path().join("section.bin");
    std::fs::write(&section, relocatable_fatbin(90)).unwrap();
    let object_path = fixtures::host_object(dir.path(), &section, "__nv_relfatbin");
    let object = std::fs::read(&object_path).unwrap();
    let library_path = dir.path().join("libkernel.a");
    fixtures::run(
        std::process::Command::new("ar")
            .arg("rcs")
            .arg(&library_path)
            .arg(&object_path),
    );
    let library = std::fs::read(&library_path).unwrap();
    let member = library
        .windows(object.len())
        .position(|window| window == object)
        .expect("the object, whole, in the library");
    let shoff = u64::from_le_bytes(object[40..48].try_into().unwrap()) as usize;
    let shnum = usize::from(u16::from_le_bytes(object[60..62].try_into().unwrap()));
    let mut refused = 0;
    for index in 1..shnum {
        let header = shoff + index * 64;
        if u32::from_le_bytes(object[header + 4..header + 8].try_into().unwrap()) == 8 {
            continue; // SHT_NOBITS: no bytes in the file.
        }
        // Its offset, plus 2^40.
        let at = header + 24 + 5;
        let mut damaged_object = object.clone();
        damaged_object[at] ^= 0x01;
        let mut damaged_library = library.clone();
        damaged_library[member + at] ^= 0x01;
        for (kind, bytes) in [
            (InputKind::Object, &damaged_object),
            (InputKind::Library, &damaged_library),
        ] {
            let mut linker = options(90).linker().unwrap();
            let error = linker.add(kind, bytes, "damaged").map(drop).unwrap_err();
            match &error {
                // The symbol or string table, which the object reader itself needs.
                Error::NotDeviceCode { .. } => {}
                Error::MalformedImage { error, .. } if error.to_string().contains("symbol") => {}
                Error::MalformedImage { error, .. }
                    if error.to_string().contains("lie outside the file") =>
                {
                    refused += 1
                }
                other => panic!("section {index} in {kind:?}: {other:?}"),
            }
        }
    }
    assert!(refused >= 8, "{refused}");
}

#[test]
fn an_executable_cubin_is_refused_naming_relocatable_code() {
    // nvJitLink takes an executable cubin and links none of its code: the link "succeeded" with
    // a cubin without the kernel.
    let executable = Program::new("extern \"C\" __global__ void whole(float *p) { p[0] = 1; }")
        .arch(arch(90))
        .cache(false)
        .compile()
        .unwrap()
        .into_code();
    assert_eq!(executable[16], 2, "ET_EXEC");
    for kind in [InputKind::Cubin, InputKind::Any] {
        let mut linker = options(90).linker().unwrap();
        let error = linker
            .add(kind, &executable, "whole.cubin")
            .map(drop)
            .unwrap_err();
        assert!(
            matches!(&error, Error::NotRelocatable { what } if what == "whole.cubin"),
            "{kind:?}: {error:?}"
        );
        assert!(error.to_string().contains("-rdc"), "{error}");
    }
}

#[test]
fn an_input_of_another_kind_than_added_as_is_refused_naming_the_kind_to_use() {
    let ptx = relocatable(KERNEL, 90, Output::Ptx);
    let mut linker = options(90).linker().unwrap();
    let error = linker
        .add(InputKind::Cubin, &ptx, "kernel.ptx")
        .map(drop)
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::LinkInputKind {
                declared: InputKind::Cubin,
                found: ImageKind::Ptx,
                suggested: InputKind::Ptx,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("InputKind::Ptx"), "{error}");
    let error = linker
        .add(InputKind::Any, b"not device code", "notes.txt")
        .map(drop)
        .unwrap_err();
    assert!(matches!(error, Error::NotDeviceCode { .. }), "{error:?}");
}

#[test]
fn a_file_is_checked_as_bytes_are() {
    let dir = tempfile::tempdir().unwrap();
    let fatbin = relocatable_fatbin(90);
    let cut = dir.path().join("cut.fatbin");
    std::fs::write(&cut, &fatbin[..fatbin.len() / 2]).unwrap();
    let mut linker = options(90).linker().unwrap();
    let error = linker.add_file(InputKind::Any, &cut).map(drop).unwrap_err();
    assert!(
        matches!(&error, Error::MalformedImage { what, kind: ImageKind::Fatbin, .. }
            if Path::new(what) == cut),
        "{error:?}"
    );
    let missing = dir.path().join("missing.cubin");
    let error = linker
        .add_file(InputKind::Cubin, &missing)
        .map(drop)
        .unwrap_err();
    assert!(
        matches!(&error, Error::ReadFile { path, .. } if path == &missing),
        "{error:?}"
    );
}

#[test]
fn a_failed_link_leaves_the_links_of_other_threads_working() {
    // Adding LTO-IR for sm_90 to an sm_80 link fails in nvJitLinkAddData (an sm_80 cubin did
    // too, before cudyn refused it first), which left nvJitLink's lock held by the failing
    // thread: every later link of another thread waited forever.
    let sm_90 = relocatable(KERNEL, 90, Output::LtoIr);
    let failed = std::thread::spawn(move || {
        let options = LinkOptions::new().arch(arch(80)).lto(true).cache(false);
        let mut linker = options.linker()?;
        linker.add(InputKind::LtoIr, &sm_90, "kernel_sm_90.ltoir")?;
        linker.finish().map(drop)
    })
    .join()
    .unwrap();
    assert!(
        matches!(&failed, Err(Error::Cuda(call)) if call.call == "nvJitLinkAddData"),
        "{failed:?}"
    );
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let kernel = relocatable(KERNEL, 90, Output::Cubin);
        let helper = relocatable(HELPER, 90, Output::Cubin);
        let linked = link(
            90,
            &[
                (InputKind::Cubin, &kernel, "kernel.cubin"),
                (InputKind::Cubin, &helper, "helper.cubin"),
            ],
        );
        let _ = done.send(linked.map(|linked| assert_links_k(&linked, "after a failed link")));
    });
    let outcome = result.recv_timeout(std::time::Duration::from_secs(120));
    assert!(matches!(outcome, Ok(Ok(()))), "{outcome:?}");
}

#[test]
fn a_cubin_for_another_architecture_is_refused_naming_both() {
    let cubin = relocatable(HELPER, 90, Output::Cubin);
    let mut linker = options(80).linker().unwrap();
    let error = linker
        .add(InputKind::Cubin, &cubin, "helper.cubin")
        .map(drop)
        .unwrap_err();
    assert!(
        matches!(&error, Error::LinkArchMismatch { what, input, link }
            if what == "helper.cubin" && input == "sm_90" && link == "sm_80"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("SASS links only into its own architecture"),
        "{error}"
    );
    // LTO-IR and PTX of an older architecture are no mismatch: a later one takes them.
    let ptx = relocatable(HELPER, 80, Output::Ptx);
    let mut linker = options(90).linker().unwrap();
    linker.add(InputKind::Ptx, &ptx, "helper.ptx").unwrap();
}
