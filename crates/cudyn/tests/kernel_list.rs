//! `Image::kernel_list`: every kernel of an image once, with its C++ name and signature, from
//! fatbins that NVRTC and nvcc made for two architectures and PTX, a host object embedding one,
//! and a static library; checked against the C++ source, against cuobjdump's symbol tables
//! (which kernels each cubin defines) and against c++filt (how each symbol demangles). A module
//! that cannot be read is an error, never a shorter list (nor, for a kernel's parameters, "not in
//! the image").

mod fixtures;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use cudyn::compile::{Arch, FatbinBuilder};
use cudyn::{Error, Image, KernelName};

const SOURCE: &str = include_str!("kernels/kernel_list.cu");

/// The kernels of [`SOURCE`] as `(symbol, name, signature)`, in the listing's order: by C++
/// name, then signature, then symbol.
const EXPECTED: [(&str, &str, Option<&str>); 7] = [
    (
        "_ZN4blas5axpbyIdEEvT_PKS1_S1_PS1_j",
        "blas::axpby<double>",
        Some("blas::axpby<double>(double, double const*, double, double*, unsigned int)"),
    ),
    (
        "_ZN4blas5axpbyIfEEvT_PKS1_S1_PS1_j",
        "blas::axpby<float>",
        Some("blas::axpby<float>(float, float const*, float, float*, unsigned int)"),
    ),
    (
        "_ZN4blas6detail4fillILi3EEEvPi",
        "blas::detail::fill<3>",
        Some("blas::detail::fill<3>(int*)"),
    ),
    ("plain", "plain", None),
    ("_Z5scalePdi", "scale", Some("scale(double*, int)")),
    ("_Z5scalePfi", "scale", Some("scale(float*, int)")),
    ("zero_args", "zero_args", None),
];

fn described(kernels: &[KernelName]) -> Vec<(&str, &str, Option<&str>)> {
    kernels
        .iter()
        .map(|k| (k.symbol.as_str(), k.name.as_str(), k.signature.as_deref()))
        .collect()
}

/// [`SOURCE`] as fatbins: from NVRTC (SASS for sm_75 and sm_90, compute_90 PTX, through
/// nvFatbin) and from nvcc (the same targets).
fn fatbins() -> [(&'static str, Vec<u8>); 2] {
    let nvrtc = |arch: &str, output| fixtures::compile_source(SOURCE, &[], &[arch], output);
    let mut fatbin = FatbinBuilder::new().unwrap();
    for (sm, arch) in [(75, "-arch=sm_75"), (90, "-arch=sm_90")] {
        let cubin = nvrtc(arch, fixtures::Output::Cubin);
        fatbin
            .add_cubin(&cubin, Arch::new(sm / 10, sm % 10), "kernel_list.cu")
            .unwrap();
    }
    let ptx = nvrtc("-arch=compute_90", fixtures::Output::Ptx);
    fatbin
        .add_ptx(&ptx, Arch::new(9, 0), "kernel_list.cu")
        .unwrap();
    let nvcc = fixtures::nvcc(
        SOURCE,
        &[
            "-fatbin",
            "-gencode=arch=compute_75,code=sm_75",
            "-gencode=arch=compute_90,code=[sm_90,compute_90]",
        ],
    );
    [("NVRTC", fatbin.finish().unwrap()), ("nvcc", nvcc)]
}

/// The kernels each cubin of `file` defines as cuobjdump's symbol tables list them: functions
/// (`info` & 0xf is 2, whether local, global or weak) marked as entries (`other` has 0x10).
fn cuobjdump_kernels(file: &Path) -> Vec<BTreeSet<String>> {
    let elf = fixtures::run(Command::new(fixtures::cuobjdump()).arg("-elf").arg(file));
    let mut cubins: Vec<BTreeSet<String>> = Vec::new();
    let mut in_symbols = false;
    for line in elf.lines() {
        if line.starts_with("64-bit ELF:") {
            cubins.push(BTreeSet::new());
        } else if line.starts_with('.') {
            in_symbols = line.trim() == ".section .symtab";
        } else if let (true, Some(cubin)) = (in_symbols, cubins.last_mut()) {
            let columns: Vec<&str> = line.split_whitespace().collect();
            let hex = |text: &str| u64::from_str_radix(text.trim_start_matches("0x"), 16).ok();
            if let [_, _, _, info, other, _, name] = columns[..] {
                if let (Some(info), Some(other)) = (hex(info), hex(other)) {
                    if info & 0xf == 2 && other & 0x10 != 0 {
                        cubin.insert(name.to_string());
                    }
                }
            }
        }
    }
    cubins
}

/// How binutils' c++filt demangles `symbol`.
fn cxxfilt(symbol: &str) -> String {
    fixtures::run(Command::new("c++filt").arg(symbol))
        .trim()
        .to_string()
}

#[test]
fn every_kernel_of_a_fatbin_is_listed_once_with_its_signature() {
    let dir = tempfile::tempdir().unwrap();
    for (compiler, fatbin) in fatbins() {
        let path = dir.path().join(format!("{compiler}.fatbin"));
        std::fs::write(&path, &fatbin).unwrap();
        let listed = Image::new(&fatbin[..]).unwrap().kernel_list().unwrap();
        assert_eq!(described(&listed), EXPECTED, "{compiler}");

        // Each of the two cubins defines every kernel, as cuobjdump reads them.
        let symbols: BTreeSet<String> = listed.iter().map(|k| k.symbol.clone()).collect();
        let cubins = cuobjdump_kernels(&path);
        assert_eq!(cubins.len(), 2, "{compiler}");
        for cubin in cubins {
            assert_eq!(cubin, symbols, "{compiler}");
        }
        // A C++ kernel's signature is the declaration c++filt reads, without a template's
        // return type; an extern "C" kernel's symbol is no mangled name.
        for kernel in &listed {
            let demangled = cxxfilt(&kernel.symbol);
            match &kernel.signature {
                Some(signature) => assert!(
                    demangled == *signature || demangled == format!("void {signature}"),
                    "{compiler}: {demangled} against {signature}"
                ),
                None => assert_eq!(demangled, kernel.symbol, "{compiler}"),
            }
            let shown = kernel.to_string();
            assert_eq!(shown, kernel.signature.as_deref().unwrap_or(&kernel.symbol));
        }

        // The same kernels embedded in a host object, as nvcc embeds them.
        let object = fixtures::host_object(dir.path(), &path, ".nv_fatbin");
        let embedded = Image::from_file(&object).unwrap().kernel_list().unwrap();
        assert_eq!(described(&embedded), EXPECTED, "{compiler}: host object");
    }
}

#[test]
fn a_static_library_lists_the_kernels_of_its_members() {
    let nvrtc = cudyn::sys::nvrtc().expect("NVRTC (scripts/cuda-wheels)");
    let path = nvrtc.library.path.parent().unwrap().join("libcudadevrt.a");
    let listed = Image::from_file(&path).unwrap().kernel_list().unwrap();
    let symbols: BTreeSet<String> = listed.iter().map(|k| k.symbol.clone()).collect();
    assert_eq!(symbols.len(), listed.len(), "each once");
    let mut defined = BTreeSet::new();
    for cubin in cuobjdump_kernels(&path) {
        defined.extend(cubin);
    }
    assert!(!defined.is_empty());
    assert_eq!(symbols, defined);
}

/// Where each entry of `fatbin` starts, with its kind (1 PTX, 2 SASS) and flags: after the
/// 16-byte fatbin header (magic, version, header size, body size), each entry header holds its
/// kind (u16 at 0), its header size (u32 at 4), its payload size (u64 at 8) and flags (u64 at 40).
fn entries(fatbin: &[u8]) -> Vec<(usize, u16, u64)> {
    let u16_at = |at: usize| u16::from_le_bytes(fatbin[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(fatbin[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(fatbin[at..at + 8].try_into().unwrap());
    let end = 16 + u64_at(8) as usize;
    let mut at = u16_at(6) as usize;
    let mut out = Vec::new();
    while at < end {
        out.push((at, u16_at(at), u64_at(at + 40)));
        at += u32_at(at + 4) as usize + u64_at(at + 8) as usize;
    }
    out
}

#[test]
fn a_module_that_cannot_be_read_is_an_error_not_fewer_kernels() {
    let (_, fatbin) = fatbins().into_iter().next().unwrap();
    let entries = entries(&fatbin);
    let kinds: Vec<u16> = entries.iter().map(|&(_, kind, _)| kind).collect();
    assert_eq!(kinds, [2, 2, 1], "two cubins, then PTX");

    // The first cubin marked obfuscated: cudyn cannot read its symbols.
    let mut obfuscated = fatbin.clone();
    let (first, _, flags) = entries[0];
    obfuscated[first + 40..first + 48].copy_from_slice(&(flags | 0x1_0000).to_le_bytes());
    // The PTX, compressed with zstd (flag 0x8000), with its stream cut to 8 bytes (the
    // compressed size, u32 at 16).
    let mut cut = fatbin.clone();
    let (ptx, _, flags) = entries[2];
    assert_ne!(flags & 0x8000, 0, "nvFatbin compresses PTX");
    cut[ptx + 16..ptx + 20].copy_from_slice(&8u32.to_le_bytes());
    for (damaged, entry, problem) in [
        (obfuscated, "fatbin entry 0", "obfuscated"),
        (cut, "fatbin entry 2", "zstd"),
    ] {
        let image = Image::new(&damaged[..]).unwrap();
        let error = image.kernel_list().unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(error, Error::MalformedImage { .. })
                && text.contains(entry)
                && text.contains(problem),
            "{text}"
        );
        // The layout of a kernel the other modules define is theirs; a kernel none defines may
        // be in the module that cannot be read: not "not in the image".
        assert_eq!(image.param_layout("plain").unwrap().len(), 1);
        let error = image.param_layout("absent").unwrap_err();
        assert!(error.to_string().contains(entry), "{error}");
        let inspection = image.inspect().unwrap();
        assert_eq!(inspection.param_layout("plain").unwrap().unwrap().len(), 1);
        let error = inspection.param_layout("absent").unwrap_err();
        assert!(error.to_string().contains(entry), "{error}");
    }
    let whole = Image::new(&fatbin[..]).unwrap();
    let error = whole.param_layout("absent").unwrap_err();
    assert!(matches!(error, Error::KernelNotInImage { .. }), "{error}");
    assert_eq!(whole.inspect().unwrap().param_layout("absent"), Ok(None));

    // LTO-IR alone: cudyn cannot read its kernels. Beside whole cubins and PTX it is passed
    // over.
    let ltoir = fixtures::compile_source(
        SOURCE,
        &[],
        &["-arch=sm_90", "-dlto"],
        fixtures::Output::LtoIr,
    );
    let error = Image::new(&ltoir[..]).unwrap().kernel_list().unwrap_err();
    assert!(error.to_string().contains("link it"), "{error}");
    let cubin = fixtures::compile_source(SOURCE, &[], &["-arch=sm_90"], fixtures::Output::Cubin);
    let ptx = fixtures::compile_source(SOURCE, &[], &["-arch=compute_90"], fixtures::Output::Ptx);
    let with_ltoir = fixtures::fatbin(&[(90, &cubin[..])], &ptx, &ltoir, "size");
    let listed = Image::new(&with_ltoir[..]).unwrap().kernel_list().unwrap();
    assert_eq!(described(&listed), EXPECTED);
}
