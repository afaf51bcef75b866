//! cudyn's offline inspection agrees with NVIDIA's cuobjdump on the same files: architectures,
//! kernels, parameter layouts, resources and variables of every cubin, whether alone, in a fatbin
//! (plain or zstd-compressed) or embedded in a host object; and kernels with parameters of 4,096
//! and 32,000 bytes, recorded in both formats of parameter record, from NVRTC and from nvcc.

mod fixtures;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use cudyn::inspect::cubin::Cubin;
use cudyn::inspect::fatbin::{EntryContents, EntryKind};
use cudyn::inspect::{Contents, Module};
use cudyn::{Image, ImageKind, ParamLayout};

/// One ELF as cuobjdump describes it.
#[derive(Debug, Default)]
struct RefElf {
    sm: String,
    params: BTreeMap<String, Vec<ParamLayout>>,
    /// The attributes that hold each kernel's parameter records (`EIATTR_KPARAM_INFO`, `_V2`).
    param_records: BTreeMap<String, BTreeSet<String>>,
    objects: BTreeMap<String, u64>,
    resources: BTreeMap<String, [u64; 5]>,
}

fn hex(text: &str) -> u64 {
    let text = text.trim();
    match text.strip_prefix("0x") {
        Some(digits) => u64::from_str_radix(digits, 16).unwrap(),
        None => text.parse().unwrap(),
    }
}

/// `Name : value` fields of a cuobjdump `Value:` line.
fn field(line: &str, name: &str) -> u32 {
    let rest = line.split(name).nth(1).unwrap();
    let value = rest
        .trim_start()
        .trim_start_matches(':')
        .split_whitespace()
        .next();
    hex(value.unwrap()) as u32
}

fn reference(file: &Path) -> Vec<RefElf> {
    let cuobjdump = fixtures::cuobjdump();
    let elf = fixtures::run(Command::new(&cuobjdump).arg("-elf").arg(file));
    let mut elfs: Vec<RefElf> = Vec::new();
    let mut section = String::new();
    let mut table: Option<&str> = None;
    let mut section_names: BTreeMap<u64, String> = BTreeMap::new();
    let mut attribute = String::new();
    for line in elf.lines() {
        if let Some(name) = line.trim().strip_prefix("Attribute:") {
            attribute = name.trim().to_string();
        }
        if let Some(header) = line.strip_prefix("64-bit ELF:") {
            let sm = header
                .split("sm=")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap();
            elfs.push(RefElf {
                sm: sm.to_string(),
                ..RefElf::default()
            });
            section_names.clear();
            continue;
        }
        let Some(current) = elfs.last_mut() else {
            continue;
        };
        if line.starts_with("Sections:") {
            table = Some("sections");
            continue;
        }
        if line.trim().is_empty() {
            table = None;
            continue;
        }
        if line.starts_with('.') {
            section = line.trim().to_string();
            table = (section == ".section .symtab").then_some("symbols");
            continue;
        }
        let columns: Vec<&str> = line.split_whitespace().collect();
        match table {
            Some("sections") if columns[0] != "Index" => {
                // The index column is hexadecimal without a prefix.
                let index = u64::from_str_radix(columns[0], 16).unwrap();
                section_names.insert(index, columns.last().unwrap().to_string());
            }
            Some("symbols") if columns.len() == 7 && columns[0] != "index" => {
                let info = hex(columns[3]);
                let in_section = section_names
                    .get(&hex(columns[5]))
                    .map_or("", String::as_str);
                let variable = in_section.starts_with(".nv.global")
                    || (in_section.starts_with(".nv.constant") && in_section != ".nv.constant0");
                if info & 0xf == 1 && variable {
                    current
                        .objects
                        .insert(columns[6].to_string(), hex(columns[2]));
                }
            }
            _ => {}
        }
        if let Some(kernel) = section.strip_prefix(".nv.info.") {
            if line.contains("Ordinal :") {
                current
                    .param_records
                    .entry(kernel.to_string())
                    .or_default()
                    .insert(attribute.clone());
                // cuobjdump lists parameters last to first; the ordinal says where each goes.
                let params = current.params.entry(kernel.to_string()).or_default();
                let ordinal = field(line, "Ordinal") as usize;
                if params.len() <= ordinal {
                    params.resize(ordinal + 1, ParamLayout { offset: 0, size: 0 });
                }
                params[ordinal] = ParamLayout {
                    offset: field(line, "Offset") as usize,
                    size: field(line, "Size") as usize,
                };
            } else {
                current.params.entry(kernel.to_string()).or_default();
            }
        }
    }
    let usage = fixtures::run(Command::new(&cuobjdump).arg("-res-usage").arg(file));
    let mut index = usize::MAX;
    let mut function = String::new();
    for line in usage.lines() {
        if line.starts_with("Resource usage:") {
            index = index.wrapping_add(1);
        } else if let Some(name) = line.trim().strip_prefix("Function ") {
            function = name.trim_end_matches(':').to_string();
        } else if line.trim_start().starts_with("REG:") {
            let value = |key: &str| -> u64 {
                line.split_whitespace()
                    .find_map(|pair| pair.strip_prefix(key))
                    .map(hex)
                    .unwrap()
            };
            let resources = [
                value("REG:"),
                value("STACK:"),
                value("SHARED:"),
                value("LOCAL:"),
                value("CONSTANT[0]:"),
            ];
            elfs[index].resources.insert(function.clone(), resources);
        }
    }
    assert_eq!(index.wrapping_add(1), elfs.len(), "one usage block per ELF");
    elfs
}

fn cubins(file: &Path) -> Vec<Cubin> {
    let inspection = Image::from_file(file).unwrap().inspect().unwrap();
    inspection
        .modules()
        .into_iter()
        .filter_map(|module| match module {
            Module::Cubin(cubin) => Some(cubin.clone()),
            _ => None,
        })
        .collect()
}

/// The cubins of `file` as cudyn reads them, checked against cuobjdump's description of the
/// same file: kernels and their parameter layouts, resources and variables of each, without a
/// note; with that description.
fn agrees(file: &Path) -> (Vec<Cubin>, Vec<RefElf>) {
    let ours = cubins(file);
    let theirs = reference(file);
    assert_eq!(
        ours.len(),
        theirs.len(),
        "{}: number of cubins",
        file.display()
    );
    for (cubin, reference) in ours.iter().zip(&theirs) {
        let what = format!("{} sm_{}", file.display(), reference.sm);
        let sm: String = reference
            .sm
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        assert_eq!(cubin.arch.to_string(), sm, "{what}: arch");
        assert!(cubin.notes.is_empty(), "{what}: {:?}", cubin.notes);
        let params: BTreeMap<String, Vec<ParamLayout>> = cubin
            .kernels
            .iter()
            .map(|k| (k.name.clone(), k.params.clone()))
            .collect();
        assert_eq!(params, reference.params, "{what}: kernels and parameters");
        let resources: BTreeMap<String, [u64; 5]> = cubin
            .kernels
            .iter()
            .map(|k| {
                let resources = [
                    u64::from(k.registers.unwrap()),
                    u64::from(k.stack_bytes.unwrap()),
                    k.shared_bytes,
                    k.local_bytes,
                    k.constant0_bytes,
                ];
                (k.name.clone(), resources)
            })
            .collect();
        assert_eq!(resources, reference.resources, "{what}: resources");
        let objects: BTreeMap<String, u64> = cubin
            .variables
            .iter()
            .map(|v| (v.name.clone(), v.size))
            .collect();
        assert_eq!(objects, reference.objects, "{what}: variables");
    }
    (ours, theirs)
}

/// [`agrees`] for a file made from [`fixtures::SOURCE`].
fn assert_agrees(file: &Path) -> Vec<Cubin> {
    let (ours, theirs) = agrees(file);
    for reference in &theirs {
        // The reference really was read: every fixture has 5 kernels and 3 variables.
        assert_eq!(reference.params.len(), 5, "{reference:?}");
        assert_eq!(reference.resources.len(), 5, "{reference:?}");
        assert_eq!(reference.objects.len(), 3, "{reference:?}");
    }
    ours
}

/// `cuobjdump -lelf -lptx`: (kind, arch) of each listed entry.
fn listing(file: &Path) -> Vec<(String, String)> {
    let out = fixtures::run(
        Command::new(fixtures::cuobjdump())
            .args(["-lelf", "-lptx"])
            .arg(file),
    );
    out.lines()
        .filter_map(|line| {
            let (kind, name) = line.split_once(" file")?;
            let arch = name.rsplit('.').nth(1)?.to_string();
            Some((kind.to_string(), arch))
        })
        .collect()
}

#[test]
fn agrees_with_cuobjdump_on_cubins_fatbins_and_host_objects() {
    let fixtures = fixtures::fixtures();

    for (sm, file) in &fixtures.cubins {
        assert_eq!(Image::from_file(file).unwrap().kind(), ImageKind::Cubin);
        let cubin = assert_agrees(file);
        assert_eq!(cubin[0].arch, *sm);
        let kernel_count = cubin[0].kernels.len();
        assert_eq!(
            kernel_count, 5,
            "saxpy, bystruct, many and two tsum instances"
        );
    }

    let specific = assert_agrees(&fixtures.arch_specific);
    assert_eq!(specific[0].arch_name(), "sm_90a");

    for file in fixtures.fatbins.iter().chain([&fixtures.host_object]) {
        let cubins = assert_agrees(file);
        let ours: Vec<u32> = cubins.iter().map(|c| c.arch).collect();
        let copies = if file == &fixtures.host_object { 2 } else { 1 };
        assert_eq!(ours, fixtures::ARCHS.repeat(copies), "{}", file.display());

        // cuobjdump lists SASS and PTX, never the obfuscated LTO-IR.
        let inspection = Image::from_file(file).unwrap().inspect().unwrap();
        let entries: Vec<(String, String)> = fatbins(&inspection.contents)
            .into_iter()
            .flat_map(|f| &f.entries)
            .filter_map(|entry| match entry.kind {
                EntryKind::Sass => Some(("ELF".to_string(), format!("sm_{}", entry.arch))),
                EntryKind::Ptx => Some(("PTX".to_string(), format!("sm_{}", entry.arch))),
                _ => None,
            })
            .collect();
        assert_eq!(entries, listing(file), "{}", file.display());
    }
}

fn fatbins(contents: &Contents) -> Vec<&cudyn::inspect::fatbin::Fatbin> {
    match contents {
        Contents::Fatbin(fatbin) => vec![fatbin],
        Contents::HostBinary(host) => host.sections.iter().flat_map(|s| &s.fatbins).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn ptx_and_ltoir_agree_with_the_cubins_nvidia_reads() {
    let fixtures = fixtures::fixtures();
    let sm90 = &fixtures.cubins.iter().find(|(sm, _)| *sm == 90).unwrap().1;
    let reference = reference(sm90).remove(0);

    let ptx = Image::from_file(&fixtures.ptx).unwrap();
    assert_eq!(ptx.kind(), ImageKind::Ptx);
    let Contents::Ptx(module) = ptx.inspect().unwrap().contents else {
        panic!("not PTX");
    };
    assert_eq!(module.target, ["sm_90"]);
    assert_eq!(module.address_size, Some(64));
    let version = module.version.clone().unwrap();
    assert!(
        version.starts_with("9."),
        "NVRTC 13 writes PTX ISA 9.x, got {version}"
    );
    // PTX parameter layout, computed from the declared types, is what ptxas laid out.
    let layouts: BTreeMap<String, Vec<ParamLayout>> = module
        .entries
        .iter()
        .map(|entry| (entry.name.clone(), entry.layout().unwrap()))
        .collect();
    assert_eq!(layouts, reference.params);
    let variables: BTreeMap<String, u64> = module
        .variables
        .iter()
        .map(|v| (v.name.clone(), v.size.unwrap()))
        .collect();
    assert_eq!(variables, reference.objects);

    let ltoir = Image::from_file(&fixtures.ltoir).unwrap();
    assert_eq!(ltoir.kind(), ImageKind::LtoIr);
    let Contents::LtoIr(header) = ltoir.inspect().unwrap().contents else {
        panic!("not LTO-IR");
    };
    assert_eq!(header.arch, Some(90));

    // The fatbin's PTX and LTO-IR entries decode (the PTX after zstd) to the same.
    let zstd = Image::from_file(&fixtures.fatbins[1])
        .unwrap()
        .inspect()
        .unwrap();
    let Contents::Fatbin(fatbin) = &zstd.contents else {
        panic!("not a fatbin");
    };
    let ptx_entry = fatbin
        .entries
        .iter()
        .find(|e| e.kind == EntryKind::Ptx)
        .unwrap();
    assert_eq!(ptx_entry.contents, Some(EntryContents::Ptx(module)));
    let lto_entry = fatbin
        .entries
        .iter()
        .find(|e| e.kind == EntryKind::LtoIr)
        .unwrap();
    assert_eq!(lto_entry.arch, 90);
}

#[test]
fn offline_param_layout_and_demangled_names() {
    let fixtures = fixtures::fixtures();
    let reference = reference(&fixtures.fatbins[1]).remove(0);
    let image = Image::from_file(&fixtures.fatbins[1]).unwrap();
    for (kernel, params) in &reference.params {
        assert_eq!(&image.param_layout(kernel).unwrap(), params, "{kernel}");
    }
    let many = &reference.params["many"];
    assert!(
        many.len() >= 20,
        "the wide kernel has {} params",
        many.len()
    );
    assert!(image.param_layout("no_such_kernel").is_err());

    let cubin = cubins(&fixtures.cubins[0].1).remove(0);
    let float_sum = cubin.kernel("_Z4tsumIfEvPKT_PS0_i").unwrap();
    assert_eq!(
        float_sum.demangled.as_deref(),
        Some("void tsum<float>(float const*, float*, int)")
    );
    let many = cubin.kernel("many").unwrap();
    assert_eq!(
        many.max_threads,
        Some([128, 1, 1]),
        "__launch_bounds__(128)"
    );
}

/// Kernels with a 4,096-byte and a 32,000-byte parameter (`__grid_constant__`).
const LARGE_PARAMS: &str = include_str!("kernels/large_params.cu");

/// A kernel, its parameters as `(offset, size)`, and the attribute that records them.
type Expected = (&'static str, &'static [(usize, usize)], &'static str);

/// The layouts of [`LARGE_PARAMS`]' kernels: parameter records of the first format hold sizes
/// below 16 KiB and are written up to 4,352 bytes of parameters; the second format above.
const LARGE_LAYOUTS: [Expected; 3] = [
    ("kernel4k", &[(0, 4096), (4096, 8)], "EIATTR_KPARAM_INFO"),
    (
        "kernelLargeParam",
        &[(0, 32000), (32000, 8)],
        "EIATTR_KPARAM_INFO_V2",
    ),
    (
        "kernelMixed",
        &[(0, 1), (4, 32000), (32004, 2), (32008, 8), (32016, 8)],
        "EIATTR_KPARAM_INFO_V2",
    ),
];

/// `(offset, size)` pairs as layouts.
fn layouts(pairs: &[(usize, usize)]) -> Vec<ParamLayout> {
    pairs
        .iter()
        .map(|&(offset, size)| ParamLayout { offset, size })
        .collect()
}

/// [`LARGE_PARAMS`] built by NVRTC and by nvcc: cubins for sm_75, sm_90 and sm_120, and fatbins
/// with SASS and PTX; by file name.
fn large_param_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let nvrtc = |arch: &str, output| {
        fixtures::compile_source(LARGE_PARAMS, &[], &[&format!("-arch={arch}")], output)
    };
    let mut files: Vec<(String, Vec<u8>)> = ["sm_75", "sm_90", "sm_120"]
        .into_iter()
        .map(|arch| {
            let cubin = nvrtc(arch, fixtures::Output::Cubin);
            (format!("nvrtc_{arch}.cubin"), cubin)
        })
        .collect();
    let cubins: Vec<(u32, Vec<u8>)> = [75, 90]
        .into_iter()
        .map(|sm| (sm, nvrtc(&format!("sm_{sm}"), fixtures::Output::Cubin)))
        .collect();
    let cubin_refs: Vec<(u32, &[u8])> = cubins.iter().map(|(sm, c)| (*sm, &c[..])).collect();
    let ptx = nvrtc("compute_90", fixtures::Output::Ptx);
    let ltoir = fixtures::compile_source(
        LARGE_PARAMS,
        &[],
        &["-arch=sm_90", "-dlto"],
        fixtures::Output::LtoIr,
    );
    files.push((
        "nvrtc.fatbin".into(),
        fixtures::fatbin(&cubin_refs, &ptx, &ltoir, "size"),
    ));
    for arch in ["sm_90", "sm_120"] {
        let cubin = fixtures::nvcc(LARGE_PARAMS, &["-cubin", &format!("-arch={arch}")]);
        files.push((format!("nvcc_{arch}.cubin"), cubin));
    }
    let fatbin = fixtures::nvcc(
        LARGE_PARAMS,
        &[
            "-fatbin",
            "-gencode=arch=compute_75,code=sm_75",
            "-gencode=arch=compute_90,code=[sm_90,compute_90]",
        ],
    );
    files.push(("nvcc.fatbin".into(), fatbin));
    files
        .into_iter()
        .map(|(name, bytes)| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect()
}

#[test]
fn parameters_of_4096_and_32000_bytes_agree_with_cuobjdump() {
    let dir = tempfile::tempdir().unwrap();
    let files = large_param_files(dir.path());
    assert_eq!(files.len(), 7);
    let mut ptx_modules = 0;
    for file in &files {
        let (cubins, references) = agrees(file);
        assert!(!cubins.is_empty(), "{}", file.display());
        let image = Image::from_file(file).unwrap();
        for reference in &references {
            let what = format!("{} sm_{}", file.display(), reference.sm);
            assert_eq!(reference.params.len(), 3, "{what}: {reference:?}");
            for (kernel, layout, record) in LARGE_LAYOUTS {
                let layout = layouts(layout);
                // cuobjdump's reading, which cudyn's agrees with (above), is the expected one.
                assert_eq!(reference.params[kernel], layout, "{what}: {kernel}");
                assert_eq!(
                    reference.param_records[kernel],
                    BTreeSet::from([record.to_string()]),
                    "{what}: {kernel}"
                );
                assert_eq!(image.param_layout(kernel).unwrap(), layout, "{what}");
            }
        }
        // The PTX of a fatbin lays the parameters out as the cubins record them.
        let inspection = image.inspect().unwrap();
        for module in inspection.modules() {
            let Module::Ptx(ptx) = module else { continue };
            ptx_modules += 1;
            for (kernel, layout, _) in LARGE_LAYOUTS {
                let found = ptx.entry(kernel).unwrap().param_layout().unwrap();
                assert_eq!(found, layouts(layout), "{} PTX {kernel}", file.display());
            }
        }
    }
    assert_eq!(ptx_modules, 2, "one in each fatbin");
}
