//! The structural validator against damaged real images: cubins, PTX and fatbins (uncompressed,
//! zstd and LZ4) from NVRTC and nvFatbin, cut at every header, section and entry boundary, with
//! every header byte flipped and every size and offset field enlarged. Each result must be a clean
//! error or an image that is whole by an independent reading (the `object` crate's ELF reader, a
//! plain walk of the fatbin layout, brace counting for PTX), so that nothing the validator lets
//! through can make the driver read past the bytes given.

mod fixtures;

use std::time::Instant;

use cudyn::{Error, Image, ImageKind};
use fixtures::damage::{damages, table_damages, Damage, Depth};
use fixtures::Output;
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind};

fn u16_at(bytes: &[u8], at: usize) -> usize {
    u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()).into()
}

fn u32_at(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// Whether `bytes` are whole device code, read independently of cudyn; the reason when not.
fn whole(bytes: &[u8]) -> Result<(), String> {
    if bytes.starts_with(&0xBA55_ED50u32.to_le_bytes()) {
        whole_fatbin(bytes)
    } else if bytes.starts_with(b"\x7fELF") {
        whole_cubin(bytes)
    } else {
        whole_ptx(bytes)
    }
}

fn whole_fatbin(bytes: &[u8]) -> Result<(), String> {
    let end = u16_at(bytes, 6) as u64 + u64_at(bytes, 8);
    if end > bytes.len() as u64 {
        return Err(format!("fatbin of {end} bytes in {}", bytes.len()));
    }
    let end = end as usize;
    let mut at = u16_at(bytes, 6);
    while at < end {
        if at + 64 > end {
            return Err(format!("entry header at {at} past {end}"));
        }
        let header = u32_at(bytes, at + 4);
        let payload = u64_at(bytes, at + 8);
        if header < 64 || (at + header) as u64 + payload > end as u64 {
            return Err(format!("entry at {at} runs past {end}"));
        }
        let start = at + header;
        let stop = start + payload as usize;
        let inside_header = |offset: usize, len: usize| offset + len <= header;
        if !inside_header(u32_at(bytes, at + 32), u32_at(bytes, at + 36)) {
            return Err(format!("entry at {at}: identifier outside its header"));
        }
        let options = u32_at(bytes, at + 20);
        if options != 0 {
            if !inside_header(options, 8) {
                return Err(format!("entry at {at}: options pair outside its header"));
            }
            let (offset, len) = (u32_at(bytes, at + options), u32_at(bytes, at + options + 4));
            if len != 0 && !inside_header(offset, len) {
                return Err(format!("entry at {at}: options outside its header"));
            }
        }
        let flags = u64_at(bytes, at + 40);
        let kind = u16_at(bytes, at);
        if kind == 1 || kind == 2 {
            let stream = &bytes[start..start + u32_at(bytes, at + 16).min(stop - start)];
            let size = u64_at(bytes, at + 56) as usize;
            let code = if flags & 0x8000 != 0 {
                let mut decoder =
                    ruzstd::StreamingDecoder::new(stream).map_err(|e| e.to_string())?;
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut decoder, &mut out).map_err(|e| e.to_string())?;
                out
            } else if flags & 0x2000 != 0 {
                lz4_flex::block::decompress(stream, size).map_err(|e| e.to_string())?
            } else {
                bytes[start..stop].to_vec()
            };
            if kind == 1 && code.last() != Some(&0) {
                return Err(format!("entry at {at}: PTX without a terminating NUL"));
            }
            whole(&code).map_err(|reason| format!("entry at {at}: {reason}"))?;
        }
        at = stop;
    }
    Ok(())
}

fn whole_cubin(bytes: &[u8]) -> Result<(), String> {
    let file = ElfFile64::<LittleEndian>::parse(bytes).map_err(|e| e.to_string())?;
    if file.elf_header().e_type.get(LittleEndian) != object::elf::ET_EXEC {
        return Err("not ET_EXEC".into());
    }
    for section in file.sections() {
        if section.kind() != SectionKind::UninitializedData {
            section
                .data()
                .map_err(|e| format!("section {:?}: {e}", section.name()))?;
        }
        section.name_bytes().map_err(|e| e.to_string())?;
    }
    for segment in file.segments() {
        segment.data().map_err(|e| format!("segment: {e}"))?;
    }
    for symbol in file.symbols() {
        symbol
            .name_bytes()
            .map_err(|e| format!("symbol {}: {e}", symbol.index().0))?;
    }
    Ok(())
}

/// PTX as NVRTC writes it (only `//` comments): braces that pair up, `.version` and `.target`,
/// and text that ends at the end of a statement or of a directive line.
fn whole_ptx(bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    let text = text.trim_end_matches('\0');
    let code: Vec<&str> = text
        .lines()
        .map(|line| line.split("//").next().unwrap().trim())
        .filter(|line| !line.is_empty())
        .collect();
    let mut depth = 0i64;
    for c in code.concat().chars() {
        depth += match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        if depth < 0 {
            return Err("unbalanced braces".into());
        }
    }
    if depth != 0 {
        return Err("unclosed brace".into());
    }
    let directive = |name: &str| code.iter().any(|line| line.starts_with(name));
    if !directive(".version") || !directive(".target") {
        return Err("no .version or .target".into());
    }
    let last = code.last().copied().unwrap_or_default();
    let ends_a_line = [".version", ".target", ".address_size"]
        .iter()
        .any(|d| last.starts_with(d));
    if !(last.ends_with(';') || last.ends_with('}') || ends_a_line) {
        return Err(format!("ends inside a statement: {last:?}"));
    }
    Ok(())
}

/// Validates `bytes` as a load would, before the driver.
fn validate(bytes: &[u8]) -> cudyn::Result<ImageKind> {
    let image = Image::new(bytes)?;
    image.validate()?;
    Ok(image.kind())
}

#[test]
fn damaged_images_are_refused_or_whole() {
    let started = Instant::now();
    for (name, original) in fixtures::loadable_images() {
        validate(&original).unwrap_or_else(|error| panic!("{name}: {error}"));
        whole(&original).unwrap_or_else(|reason| panic!("{name}: {reason}"));
        let (mut refused, mut accepted) = (0, 0);
        // Cubins and fatbins end with a structure their headers point at; PTX may end anywhere a
        // statement does.
        let binary = !name.ends_with(".ptx");
        // The cubin and PTX inside the fatbins are damaged on their own; inside, they are
        // validated by the same code.
        let mut list = damages(&original, 61, Depth::Outer);
        list.extend(table_damages(&original, Depth::Outer));
        for damage in &list {
            let bytes = damage.apply(&original);
            match validate(&bytes) {
                Ok(_) if binary && matches!(damage, Damage::Truncate(_)) => {
                    panic!("{name}, {damage}: a cut binary was accepted")
                }
                Ok(_) => {
                    accepted += 1;
                    if let Err(reason) = whole(&bytes) {
                        panic!("{name}, {damage}: accepted, but not whole: {reason}");
                    }
                }
                Err(Error::Cuda(call)) => panic!("{name}, {damage}: a CUDA call was made: {call}"),
                Err(_) => refused += 1,
            }
        }
        eprintln!(
            "{name}: {} damaged copies, {refused} refused, {accepted} accepted as whole, {:?}",
            list.len(),
            started.elapsed()
        );
    }
    eprintln!("in {:?}", started.elapsed());
}

#[test]
fn an_attribute_naming_a_symbol_past_the_table_is_refused_for_a_load() {
    // The driver's loader reads the symbol table at the index an attribute gives, unchecked: a
    // register count naming symbol 151 of 30 crashed the driver of CUDA 13.0 (SIGSEGV).
    let (_, cubin) = fixtures::loadable_images()
        .into_iter()
        .find(|(name, _)| name.ends_with(".cubin"))
        .unwrap();
    let file = ElfFile64::<LittleEndian>::parse(&cubin[..]).unwrap();
    let symbols = file.symbols().count() + 1; // `symbols()` leaves out the null symbol
    let info = file.section_by_name(".nv.info").unwrap();
    let start = info.file_range().unwrap().0 as usize;
    // The module's attributes open with a function's register count (EIATTR_REGCOUNT, 0x2f):
    // format, code, length 8, then the function's symbol index and the count.
    assert_eq!(cubin[start..start + 4], [0x04, 0x2f, 8, 0]);
    let with_index = |symbol: usize| {
        let mut bytes = cubin.clone();
        bytes[start + 4..start + 8].copy_from_slice(&(symbol as u32).to_le_bytes());
        bytes
    };
    validate(&with_index(symbols - 1)).unwrap();
    for symbol in [symbols, symbols + 121, 0x6600_0012] {
        let error = validate(&with_index(symbol)).unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(error, Error::MalformedImage { .. })
                && text.contains(".nv.info")
                && text.contains(&format!(
                    "attribute EIATTR_REGCOUNT (0x2f) at byte 0 names symbol {symbol} of {symbols}"
                )),
            "{text}"
        );
    }
}

#[test]
fn real_images_of_every_kind_and_architecture_are_accepted() {
    let fixtures = fixtures::fixtures();
    for path in fixtures.all_files() {
        let image = Image::from_file(path).unwrap();
        match image.kind() {
            ImageKind::LtoIr | ImageKind::HostBinary => {
                let error = image.validate().unwrap_err();
                assert!(matches!(error, Error::NotLoadable { .. }), "{error:?}");
            }
            _ => image
                .validate()
                .unwrap_or_else(|error| panic!("{}: {error}", path.display())),
        }
    }
    let arch_specific = Image::from_file(&fixtures.arch_specific).unwrap();
    arch_specific.validate().unwrap();
    // Blackwell cubins, whose `.nv.merc.` sections cover exactly the bytes of the constant
    // banks and of the debug sections they mirror.
    for arch in ["-arch=sm_100", "-arch=sm_120"] {
        for options in [&[arch][..], &[arch, "-G"], &[arch, "-lineinfo"]] {
            let cubin = fixtures::compile(options, Output::Cubin);
            validate(&cubin).unwrap_or_else(|error| panic!("{options:?}: {error}"));
            whole(&cubin).unwrap_or_else(|reason| panic!("{options:?}: {reason}"));
        }
    }
    // Debug information: PTX with `.file` and `.section` directives, cubins with DWARF sections.
    for options in [&["-G"][..], &["-lineinfo"][..]] {
        for (arch, output) in [("compute_90", Output::Ptx), ("sm_90", Output::Cubin)] {
            let arch = format!("-arch={arch}");
            let code = fixtures::compile(&[&arch, options[0]], output);
            validate(&code).unwrap_or_else(|error| panic!("{options:?} {arch}: {error}"));
        }
    }
    for fatbin in Image::from_file(&fixtures.host_object)
        .unwrap()
        .embedded_fatbins()
        .unwrap()
    {
        Image::new(fatbin).unwrap().validate().unwrap();
    }
}

#[test]
fn the_first_half_of_a_cubin_in_its_own_buffer_is_refused() {
    let cubin = fixtures::compile(&["-arch=sm_90"], Output::Cubin);
    let half = cubin[..cubin.len() / 2].to_vec();
    let error = validate(&half).unwrap_err();
    assert!(
        matches!(
            &error,
            Error::MalformedImage {
                kind: ImageKind::Cubin,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "the {}-byte image given is a damaged cubin",
            half.len()
        )),
        "{text}"
    );
}

#[test]
fn relocatable_device_code_is_refused_with_link_first() {
    let relocatable = fixtures::compile(&["-arch=sm_90", "-rdc=true"], Output::Cubin);
    let ptx = fixtures::compile(&["-arch=compute_90"], Output::Ptx);
    let ltoir = fixtures::compile(&["-arch=sm_90", "-dlto"], Output::LtoIr);
    let fatbin = fixtures::fatbin(&[(90, &relocatable[..])], &ptx, &ltoir, "size");
    for (what, bytes) in [("cubin", &relocatable), ("fatbin", &fatbin)] {
        let error = validate(bytes).unwrap_err();
        assert!(
            matches!(error, Error::NeedsLinking { .. }),
            "{what}: {error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("-rdc") && text.contains("cudyn::Linker"),
            "{what}: {text}"
        );
    }
    // Inspection still reads it, and says so.
    let inspection = Image::new(&relocatable[..]).unwrap().inspect().unwrap();
    let cudyn::inspect::Contents::Cubin(cubin) = inspection.contents else {
        panic!("not a cubin: {inspection:?}");
    };
    assert!(cubin.relocatable);
    assert!(cubin.kernel("saxpy").is_some());
}

#[test]
fn kinds_the_driver_cannot_load_say_what_to_do_without_contradiction() {
    let ltoir = fixtures::compile(&["-arch=sm_90", "-dlto"], Output::LtoIr);
    let error = validate(&ltoir).unwrap_err();
    assert!(
        matches!(
            error,
            Error::NotLoadable {
                kind: ImageKind::LtoIr,
                ..
            }
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("Linker") && !text.contains("expected"),
        "{text}"
    );
    // A host executable with no device code: this test binary.
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let text = Image::new(&exe[..]).unwrap_err().to_string();
    assert!(
        text.contains("no embedded device code") && !text.contains("expected"),
        "{text}"
    );
}

#[test]
fn fatbin_entries_of_unknown_kinds_are_checked_by_what_they_hold() {
    let (_, fatbin) = fixtures::loadable_images()
        .into_iter()
        .find(|(name, _)| *name == "plain.fatbin")
        .unwrap();
    // Entry offsets and kinds, walked by hand.
    let mut entries = Vec::new();
    let mut at = u16_at(&fatbin, 6);
    while at < fatbin.len() {
        entries.push((at, u16_at(&fatbin, at)));
        at += u32_at(&fatbin, at + 4) + u64_at(&fatbin, at + 8) as usize;
    }
    let with_kind = |kind_now: usize, new_kind: u16| {
        let (at, _) = entries.iter().find(|(_, kind)| *kind == kind_now).unwrap();
        let mut bytes = fatbin.clone();
        bytes[*at..at + 2].copy_from_slice(&new_kind.to_le_bytes());
        validate(&bytes)
    };
    // A cubin or PTX under a kind number cudyn does not know is checked as what it is.
    with_kind(2, 0x10).unwrap();
    with_kind(1, 0x40).unwrap();
    // LTO-IR (obfuscated by CUDA 13) under an unknown kind cannot be checked.
    let error = with_kind(8, 0x40).unwrap_err();
    assert!(matches!(error, Error::MalformedImage { .. }), "{error:?}");
}

#[test]
fn sections_all_pointing_at_the_same_bytes_are_refused_quickly() {
    let mut cubin = fixtures::compile(&["-arch=sm_90"], Output::Cubin);
    let len = cubin.len();
    let (shoff, shnum) = (u64_at(&cubin, 40) as usize, u16_at(&cubin, 60));
    for index in 0..shnum {
        let at = shoff + index * 64;
        // Every SHT_PROGBITS section made to cover the whole file.
        if u32_at(&cubin, at + 4) == 1 {
            cubin[at + 24..at + 32].copy_from_slice(&0u64.to_le_bytes());
            cubin[at + 32..at + 40].copy_from_slice(&(len as u64).to_le_bytes());
        }
    }
    let error = validate(&cubin).unwrap_err().to_string();
    assert!(error.contains("overlap"), "{error}");
}

/// Offset of field `field` (bytes into a 64-byte section header) of the section named `name`.
fn section_field(cubin: &[u8], name: &str, field: usize) -> usize {
    let elf = ElfFile64::<LittleEndian>::parse(cubin).unwrap();
    let index = elf.section_by_name(name).unwrap().index().0;
    u64_at(cubin, 40) as usize + index * 64 + field
}

/// Damage that lies inside the bytes given yet crashed the H200's driver (CUDA 13.0) in
/// `cuLibraryLoadData`, one case per kind found by the GPU test `gpu_damaged_images`: each must
/// be refused before the driver sees it.
#[test]
fn damage_that_crashed_the_driver_is_refused() {
    let cubin = fixtures::compile(&["-arch=sm_90"], Output::Cubin);
    let (sh_offset, sh_type, sh_info) = (24, 4, 44);
    let cases: Vec<(&str, Damage)> = vec![
        (
            "the null section's offset",
            Damage::Flip {
                at: u64_at(&cubin, 40) as usize + sh_offset + 5,
                mask: 1,
            },
        ),
        (
            "the section-name table's type",
            Damage::Flip {
                at: section_field(&cubin, ".shstrtab", sh_type),
                mask: 1,
            },
        ),
        (
            "sh_info of .nv.info",
            Damage::Write {
                at: section_field(&cubin, ".nv.info", sh_info),
                width: 4,
                value: 0x8000,
            },
        ),
        (
            "an empty section's offset past the end",
            Damage::Write {
                at: section_field(&cubin, ".rela.text.bystruct", sh_offset),
                width: 8,
                value: cubin.len() as u64 + 1,
            },
        ),
        (
            "e_phnum of extended numbering",
            Damage::Write {
                at: 56,
                width: 2,
                value: 0xffff,
            },
        ),
        ("bit 0 of e_flags", Damage::Flip { at: 48, mask: 1 }),
    ];
    for (what, damage) in cases {
        let error = validate(&damage.apply(&cubin)).unwrap_err();
        assert!(
            matches!(error, Error::MalformedImage { .. }),
            "{what}: {error:?}"
        );
    }
    // A fatbin entry's identifier offset is followed even when its length is 0.
    let (_, fatbin) = fixtures::loadable_images()
        .into_iter()
        .find(|(name, _)| *name == "plain.fatbin")
        .unwrap();
    let first_entry = u16_at(&fatbin, 6);
    let empty = Damage::Write {
        at: first_entry + 36,
        width: 4,
        value: 0,
    }
    .apply(&fatbin);
    validate(&empty).expect("an empty identifier inside the header is fine");
    let damaged = Damage::Write {
        at: first_entry + 32,
        width: 4,
        value: 0x8000_0000,
    }
    .apply(&empty);
    let error = validate(&damaged).unwrap_err();
    assert!(error.to_string().contains("identifier"), "{error}");
}
