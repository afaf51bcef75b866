//! Compiling with NVRTC and linking with nvJitLink, checked on the CPU: no GPU needed, but NVRTC
//! and nvJitLink are (the pinned wheels of scripts/cuda-wheels). Without them these tests fail and
//! say so; they never skip.

use cudyn::compile::{
    self, compile_all, compile_all_on, Arch, InputKind, LinkOptions, Output, Program,
};
use cudyn::Error;
use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSymbol};

const SAXPY: &str = include_str!("kernels/saxpy.cu");
const SAXPY_TEMPLATE: &str = include_str!("kernels/saxpy_template.cu");
const ITERATE_KERNEL: &str = include_str!("kernels/iterate_kernel.cu");
const ITERATE_STEP: &str = include_str!("kernels/iterate_step.cu");

const SM_80: Arch = Arch::new(8, 0);
const SM_90: Arch = Arch::new(9, 0);

/// The compilers, or a failure that says how to get them.
fn require_compilers() {
    let hint = "the compile tests need the CUDA compiler libraries: run scripts/cuda-wheels, then \
                `source ~/.cache/cudyn/venv-cu13.0/bin/activate` (or set CUDYN_LIBRARY_PATH)";
    if let Err(error) = cudyn::sys::nvrtc() {
        panic!("NVRTC is missing: {error}\n{hint}");
    }
    if let Err(error) = cudyn::sys::nvjitlink() {
        panic!("nvJitLink is missing: {error}\n{hint}");
    }
}

/// The SASS architecture an ELF cubin's header names, read straight from the header bytes.
///
/// Cubins of ELF ABI version 8 (CUDA 12.8 and later) keep the sm number in bits 8-15 of e_flags;
/// older ones in bits 0-7.
fn cubin_sm(cubin: &[u8]) -> u32 {
    assert_eq!(&cubin[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(cubin[4], 2, "not a 64-bit ELF");
    let machine = u16::from_le_bytes([cubin[18], cubin[19]]);
    assert_eq!(machine, 190, "e_machine is not EM_CUDA");
    let flags = u32::from_le_bytes(cubin[48..52].try_into().unwrap());
    if cubin[8] >= 8 {
        (flags >> 8) & 0xff
    } else {
        flags & 0xff
    }
}

/// Every symbol of a cubin, with whether it is undefined.
fn symbols(cubin: &[u8]) -> Vec<(String, bool)> {
    let file = ElfFile64::<Endianness>::parse(cubin).expect("a cubin parses as ELF64");
    file.symbols()
        .filter_map(|symbol| {
            let name = symbol.name().ok()?;
            (!name.is_empty()).then(|| (name.to_owned(), symbol.is_undefined()))
        })
        .collect()
}

fn defines(cubin: &[u8], name: &str) -> bool {
    symbols(cubin)
        .iter()
        .any(|(symbol, undefined)| symbol == name && !undefined)
}

#[test]
fn a_cubin_is_cuda_elf_for_the_requested_sm() {
    require_compilers();
    for arch in [SM_80, SM_90] {
        let compiled = Program::new(SAXPY).arch(arch).compile().unwrap();
        assert_eq!(compiled.output(), Output::Cubin);
        assert_eq!(compiled.arch(), arch);
        assert_eq!(cubin_sm(compiled.code()), arch.number(), "{arch}");
        assert!(defines(compiled.code(), "saxpy"), "{arch}: no saxpy symbol");
    }
}

#[test]
fn a_macro_without_a_name_is_refused_before_nvrtc_takes_the_next_option_for_it() {
    require_compilers();
    for (program, definition) in [
        (Program::new(SAXPY).define(""), ""),
        (Program::new(SAXPY).define_value("", "2"), "=2"),
        (Program::new(SAXPY).define("=1").include("/tmp"), "=1"),
    ] {
        let error = program.arch(SM_90).cache(false).compile().unwrap_err();
        assert!(
            matches!(&error, cudyn::Error::InvalidMacro { definition: d } if d == definition),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("a macro needs a name"),
            "{error}"
        );
    }
    let named = Program::new(SAXPY)
        .define("MAX(a,b)")
        .define_value("N", "4");
    named.arch(SM_90).cache(false).compile().unwrap();
}

#[test]
fn ptx_names_its_isa_version_and_target() {
    require_compilers();
    let compiled = Program::new(SAXPY)
        .arch(SM_90)
        .output(Output::Ptx)
        .compile()
        .unwrap();
    let code = compiled.code();
    assert_eq!(code.last(), Some(&0), "PTX must end with NUL to load as is");
    let text = std::str::from_utf8(&code[..code.len() - 1]).unwrap();
    let version = text
        .lines()
        .find_map(|line| line.strip_prefix(".version "))
        .expect("a .version directive");
    let (major, minor) = version.trim().split_once('.').expect("major.minor");
    assert!(major.parse::<u32>().unwrap() >= 8, "{version}");
    minor.parse::<u32>().unwrap();
    assert!(
        text.lines().any(|line| line.trim() == ".target sm_90"),
        "{text}"
    );
    assert!(text.contains(".entry saxpy("), "{text}");
}

#[test]
fn lto_ir_is_nvvm_ir_not_elf() {
    require_compilers();
    let compiled = Program::new(SAXPY)
        .arch(SM_90)
        .output(Output::LtoIr)
        .compile()
        .unwrap();
    // The NVVM IR container's magic, as NVIDIA's own tests check it (LTOIR_MAGIC in numba-cuda).
    let magic = u32::from_le_bytes(compiled.code()[..4].try_into().unwrap());
    assert_eq!(magic, 0x7F4E_43ED, "{:02x?}", &compiled.code()[..16]);
}

#[test]
fn a_syntax_error_returns_the_log_and_the_offending_line() {
    require_compilers();
    let source = "extern \"C\" __global__ void broken(float *p)\n{\n    p[0] = 1.0f\n}\n";
    let error = Program::new(source)
        .name("broken.cu")
        .arch(SM_90)
        .compile()
        .unwrap_err();
    let call = error.call().expect("a failed NVRTC call");
    assert_eq!(call.call, "nvrtcCompileProgram");
    assert_eq!(call.name, "NVRTC_ERROR_COMPILATION");
    let log = error.log().expect("the compile log");
    assert!(
        log.contains("broken.cu(3)") || log.contains("broken.cu(4)"),
        "{log}"
    );
    assert!(log.contains("error"), "{log}");
    let cited = log
        .lines()
        .filter(|line| line.starts_with("  broken.cu:"))
        .collect::<Vec<_>>();
    assert!(!cited.is_empty(), "no source line cited: {log}");
    for line in cited {
        let (place, text) = line.split_once(" | ").unwrap();
        let number: usize = place.rsplit(':').next().unwrap().parse().unwrap();
        assert_eq!(text, source.lines().nth(number - 1).unwrap(), "{log}");
    }
    assert!(error.to_string().contains("broken.cu"), "{error}");
}

#[test]
fn a_template_instantiated_by_a_name_expression_resolves() {
    require_compilers();
    let compiled = Program::new(SAXPY_TEMPLATE)
        .arch(SM_90)
        .name_expression("saxpy<float>")
        .name_expression("saxpy<double>")
        .compile()
        .unwrap();
    let float = compiled.lowered_name("saxpy<float>").unwrap();
    let double = compiled.lowered_name("saxpy<double>").unwrap();
    assert!(float.starts_with("_Z5saxpyIfE"), "{float}");
    assert!(double.starts_with("_Z5saxpyIdE"), "{double}");
    assert!(defines(compiled.code(), float), "{float} not in the cubin");
    assert!(
        defines(compiled.code(), double),
        "{double} not in the cubin"
    );
    assert_eq!(compiled.lowered_name("saxpy<int>"), None);
    let names: Vec<_> = compiled.lowered_names().map(|(given, _)| given).collect();
    assert_eq!(names, ["saxpy<float>", "saxpy<double>"]);
}

fn lto_piece(source: &str, name: &str) -> compile::Compiled {
    Program::new(source)
        .name(name)
        .arch(SM_90)
        .output(Output::LtoIr)
        .relocatable(true)
        .compile()
        .unwrap()
}

#[test]
fn two_lto_ir_pieces_link_into_one_cubin_with_the_call_resolved() {
    require_compilers();
    let kernel = lto_piece(ITERATE_KERNEL, "iterate_kernel.cu");
    let step = lto_piece(ITERATE_STEP, "iterate_step.cu");
    let linked = compile::link_lto(&[kernel.code(), step.code()], Some(SM_90)).unwrap();
    assert_eq!(linked.arch(), SM_90);
    assert_eq!(cubin_sm(linked.code()), 90);
    assert!(
        defines(linked.code(), "iterate"),
        "{:?}",
        symbols(linked.code())
    );
    // Undefined `.nv.*` symbols (such as `.nv.reservedSmem.offset0`) are the driver's to fill in
    // at load time; any other undefined symbol would be an unresolved call.
    let unresolved: Vec<_> = symbols(linked.code())
        .into_iter()
        .filter(|(name, undefined)| *undefined && !name.starts_with(".nv."))
        .collect();
    assert!(unresolved.is_empty(), "unresolved: {unresolved:?}");
    // Link-time optimization inlined the step into the kernel.
    assert!(
        !defines(linked.code(), "_Z4stepf"),
        "{:?}",
        symbols(linked.code())
    );

    // The same kernel piece alone cannot link: the error carries nvJitLink's log naming the call.
    let error = compile::link_lto(&[kernel.code()], Some(SM_90)).unwrap_err();
    let log = error.log().expect("the link log");
    assert!(log.contains("step"), "{error}");
}

#[test]
fn programs_compiled_to_lto_ir_and_linked_in_one_call_make_the_cubin_of_the_steps_one_by_one() {
    require_compilers();
    // Given as ordinary programs: the call makes them relocatable LTO-IR for the link's arch.
    let programs = [
        Program::new(ITERATE_KERNEL).name("iterate_kernel.cu"),
        Program::new(ITERATE_STEP)
            .name("iterate_step.cu")
            .arch(SM_80),
    ];
    let linked = compile::link_lto_programs(&programs, Some(SM_90)).unwrap();
    let kernel = lto_piece(ITERATE_KERNEL, "iterate_kernel.cu");
    let step = lto_piece(ITERATE_STEP, "iterate_step.cu");
    let by_steps = compile::link_lto(&[kernel.code(), step.code()], Some(SM_90)).unwrap();
    assert_eq!(linked.arch(), SM_90);
    assert_eq!(linked.code(), by_steps.code());
    assert!(defines(linked.code(), "iterate"));
    assert!(!defines(linked.code(), "_Z4stepf"), "the step was inlined");

    // A piece that does not compile is the error, with NVRTC's log; the link is not tried.
    let broken = [
        Program::new(ITERATE_KERNEL),
        Program::new("__device__ float step(float x) { return x +; }").name("broken.cu"),
    ];
    let error = compile::link_lto_programs(&broken, Some(SM_90)).unwrap_err();
    let log = error.log().expect("NVRTC's log");
    assert!(log.contains("broken.cu"), "{error}");
}

#[test]
fn relocatable_cubins_link_without_lto_keeping_the_real_call() {
    require_compilers();
    let piece = |source: &str| {
        Program::new(source)
            .arch(SM_90)
            .relocatable(true)
            .compile()
            .unwrap()
    };
    let (kernel, step) = (piece(ITERATE_KERNEL), piece(ITERATE_STEP));
    let mut linker = LinkOptions::new().arch(SM_90).linker().unwrap();
    linker
        .add(InputKind::Cubin, kernel.code(), "iterate_kernel.cubin")
        .unwrap()
        .add(InputKind::Cubin, step.code(), "iterate_step.cubin")
        .unwrap();
    let linked = linker.finish().unwrap();
    assert_eq!(cubin_sm(linked.code()), 90);
    assert!(defines(linked.code(), "iterate"));
    // Without link-time optimization the step stays a function of its own.
    assert!(
        defines(linked.code(), "_Z4stepf"),
        "{:?}",
        symbols(linked.code())
    );
}

#[test]
fn ptx_is_finished_to_sass_by_nvjitlink_and_inputs_come_from_files() {
    require_compilers();
    // PTX for compute_80 runs on later GPUs once finished for them.
    let ptx = Program::new(SAXPY)
        .arch(SM_80)
        .output(Output::Ptx)
        .compile()
        .unwrap();
    let cubin = compile::ptx_to_cubin(ptx.code(), Some(SM_90)).unwrap();
    assert_eq!(cubin_sm(cubin.code()), 90);
    assert!(defines(cubin.code(), "saxpy"));
    // Not to earlier ones: the error carries ptxas' reason.
    let error = compile::ptx_to_cubin(ptx.code(), Some(Arch::new(7, 5))).unwrap_err();
    assert!(error.log().unwrap().contains("ptxas"), "{error}");

    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join("saxpy.ptx");
    std::fs::write(&path, ptx.code()).unwrap();
    let mut linker = LinkOptions::new()
        .arch(SM_80)
        .verbose(true)
        .linker()
        .unwrap();
    linker.add_file(InputKind::Ptx, &path).unwrap();
    let linked = linker.finish().unwrap();
    assert_eq!(cubin_sm(linked.code()), 80);
    assert!(!linked.info_log().is_empty(), "-verbose gives an info log");
}

#[test]
fn lto_can_also_emit_the_linked_ptx() {
    require_compilers();
    let kernel = lto_piece(ITERATE_KERNEL, "iterate_kernel.cu");
    let step = lto_piece(ITERATE_STEP, "iterate_step.cu");
    let options = LinkOptions::new()
        .arch(SM_90)
        .lto(true)
        .ptx(true)
        .allow_newer_ptx(true);
    let mut linker = options.linker().unwrap();
    linker
        .add(InputKind::LtoIr, kernel.code(), "kernel")
        .unwrap();
    linker.add(InputKind::LtoIr, step.code(), "step").unwrap();
    let linked = linker.finish().unwrap();
    assert_eq!(linked.output(), Output::Ptx);
    let ptx = String::from_utf8_lossy(linked.code());
    assert!(ptx.contains(".entry iterate("), "{ptx}");
    // Link-time optimization inlined the step: no call is left in the PTX.
    assert!(!ptx.contains("call.uni"), "{ptx}");
}

#[test]
fn defines_and_in_memory_headers_reach_the_compiler() {
    require_compilers();
    let source = "#include \"factor.h\"\n\
                  extern \"C\" __global__ void scale(float *p) { p[0] *= FACTOR; }\n";
    let ptx_with = |factor: &str| {
        let compiled = Program::new(source)
            .arch(SM_90)
            .output(Output::Ptx)
            .header("factor.h", "#define FACTOR (VALUE * 1.0f)\n")
            .define_value("VALUE", factor)
            .compile()
            .unwrap();
        String::from_utf8_lossy(compiled.code()).into_owned()
    };
    // PTX writes float constants as 0f + IEEE bits.
    assert!(ptx_with("3").contains(&format!("0f{:08X}", 3.0f32.to_bits())));
    assert!(ptx_with("5").contains(&format!("0f{:08X}", 5.0f32.to_bits())));
}

#[test]
fn the_supported_architectures_are_listed_and_others_refused() {
    require_compilers();
    let supported = compile::supported_archs().unwrap();
    assert!(supported.contains(&SM_90), "{supported:?}");
    assert!(
        supported.windows(2).all(|pair| pair[0] < pair[1]),
        "{supported:?}"
    );
    let error = Program::new(SAXPY)
        .arch(Arch::new(3, 5))
        .compile()
        .unwrap_err();
    assert!(
        matches!(&error, Error::ArchUnsupported { arch, supported: listed, .. }
            if *arch == Arch::new(3, 5) && *listed == supported),
        "{error:?}"
    );
    assert!(error.to_string().contains("sm_90"), "{error}");
}

#[test]
fn with_no_arch_the_target_is_the_current_device_or_a_short_error_that_says_the_fix_first() {
    require_compilers();
    let result = Program::new(SAXPY).compile();
    match cudyn::current_device().and_then(|device| device.compute_capability()) {
        Ok((major, minor)) => {
            let compiled = result.unwrap();
            assert_eq!(compiled.arch(), Arch::new(major, minor));
            assert_eq!(cubin_sm(compiled.code()), major * 10 + minor);
        }
        Err(_) => {
            let error = result.unwrap_err();
            assert!(matches!(error, Error::ArchRequired { .. }), "{error:?}");
            let message = error.to_string();
            assert!(
                message.starts_with("no target architecture: name one with Program::arch"),
                "{message}"
            );
            assert!(message.contains("--arch sm_90"), "{message}");
            assert!(
                !message.contains('\n'),
                "one line, not the search list: {message}"
            );
            assert!(message.len() < 400, "{message}");
        }
    }
}

/// Eight different sources: each scales by its own factor in a kernel of its own name.
fn eight_programs() -> Vec<Program> {
    (1..=8)
        .map(|k| {
            Program::new(format!(
                "extern \"C\" __global__ void scale_{k}(float *p, int n) {{\n\
                     int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
                     if (i < n) p[i] *= {k}.0f;\n\
                 }}\n"
            ))
            .name(format!("scale_{k}.cu"))
            .arch(SM_90)
        })
        .collect()
}

#[test]
fn a_batch_of_eight_compiles_in_parallel_in_order() {
    require_compilers();
    let programs = eight_programs();
    let parallel = compile_all(&programs);
    assert_eq!(parallel.len(), 8);
    for (k, result) in (1..=8).zip(&parallel) {
        let compiled = result.as_ref().unwrap();
        assert_eq!(compiled.name(), format!("scale_{k}.cu"));
        assert_eq!(cubin_sm(compiled.code()), 90);
        assert!(defines(compiled.code(), &format!("scale_{k}")));
        let others = (1..=8).filter(|&j| j != k);
        for j in others {
            assert!(!defines(compiled.code(), &format!("scale_{j}")));
        }
    }
    // NVRTC is deterministic: the threads change when, not what.
    let sequential = compile_all_on(&programs, 1);
    for (a, b) in parallel.iter().zip(&sequential) {
        assert_eq!(a.as_ref().unwrap().code(), b.as_ref().unwrap().code());
    }
}

#[test]
fn one_failure_in_a_batch_leaves_the_others_compiled() {
    require_compilers();
    let mut programs = eight_programs();
    programs[3] = Program::new("this is not C++").name("bad.cu").arch(SM_90);
    let results = compile_all_on(&programs, 3);
    assert_eq!(results.len(), 8);
    for (index, result) in results.iter().enumerate() {
        if index == 3 {
            let error = result.as_ref().unwrap_err();
            assert!(error.log().unwrap().contains("bad.cu(1)"), "{error}");
        } else {
            assert!(result.is_ok(), "{index}: {result:?}");
        }
    }
}

/// A load of compiled code checks less than a load of bytes from elsewhere (the compiler wrote
/// its structure), but still refuses what the driver cannot run, before any driver call: this
/// passes on a machine with no driver at all.
#[test]
fn compiled_code_that_needs_linking_is_refused_before_the_driver() {
    require_compilers();
    let relocatable = Program::new(SAXPY)
        .arch(SM_90)
        .relocatable(true)
        .compile()
        .unwrap();
    let error = cudyn::Library::loader()
        .load_compiled(&relocatable)
        .unwrap_err();
    assert!(matches!(error, Error::NeedsLinking { .. }), "{error:?}");
    assert!(error.to_string().contains("cudyn::Linker"), "{error}");

    let ltoir = lto_piece(ITERATE_STEP, "iterate_step.cu");
    let error = cudyn::Library::loader().load_compiled(&ltoir).unwrap_err();
    assert!(matches!(error, Error::NotLoadable { .. }), "{error:?}");
}
