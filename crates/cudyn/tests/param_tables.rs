//! Kernel parameter tables that cudyn cannot read whole are errors that name the attribute, never
//! a shorter parameter list: real cubins (NVRTC and nvcc) whose `EIATTR_KPARAM_INFO_V2` records
//! are damaged, found with a reader of the attribute list written here from the format alone.
//! And the check every launch makes refuses an argument of the wrong size for a 4,096- or
//! 32,000-byte parameter, against the layout read offline.

mod fixtures;
mod plain_types;

use cudyn::compile::{Arch, FatbinBuilder};
use cudyn::launch::{check_arguments, ArgumentMismatch, KernelArgs};
use cudyn::{Error, Image, ParamLayout};
use object::read::elf::{ElfFile64, FileHeader, SectionHeader};
use object::{LittleEndian, Object, ObjectSection};
use plain_types::{Param4k, ParamLarge, ParamLargeShort};

const LARGE_PARAMS: &str = include_str!("kernels/large_params.cu");

/// `EIATTR_KPARAM_INFO_V2`'s code and the format byte of a value with a length (`EIFMT_SVAL`).
const KPARAM_INFO_V2: u8 = 0x45;
const EIFMT_SVAL: u8 = 0x04;

/// `text` after the name of the attribute, as a message about a record gives it.
macro_rules! v2 {
    ($text:literal) => {
        concat!("EIATTR_KPARAM_INFO_V2 ", $text)
    };
}

/// The sm_90 cubins of [`LARGE_PARAMS`] from NVRTC and from nvcc.
fn cubins() -> [(&'static str, Vec<u8>); 2] {
    [
        (
            "NVRTC",
            fixtures::compile_source(LARGE_PARAMS, &[], &["-arch=sm_90"], fixtures::Output::Cubin),
        ),
        (
            "nvcc",
            fixtures::nvcc(LARGE_PARAMS, &["-cubin", "-arch=sm_90"]),
        ),
    ]
}

/// A parameter record in a cubin: where its attribute starts in the file and in its section,
/// and its ordinal.
#[derive(Debug, Clone, Copy)]
struct Record {
    at: usize,
    in_section: usize,
    ordinal: u16,
}

/// The `EIATTR_KPARAM_INFO_V2` records of `kernel` in `cubin`: each attribute of its
/// `.nv.info.<kernel>` section is a format byte, a code, a 16-bit length (for `EIFMT_SVAL`) or
/// value, then the value.
fn v2_records(cubin: &[u8], kernel: &str) -> Vec<Record> {
    let elf = ElfFile64::<LittleEndian>::parse(cubin).unwrap();
    let section = elf.section_by_name(&format!(".nv.info.{kernel}")).unwrap();
    let (start, len) = section.file_range().unwrap();
    let (start, end) = (start as usize, (start + len) as usize);
    let mut records = Vec::new();
    let mut at = start;
    while at + 4 <= end {
        let (format, code) = (cubin[at], cubin[at + 1]);
        let len = u16::from_le_bytes([cubin[at + 2], cubin[at + 3]]) as usize;
        if format == EIFMT_SVAL && code == KPARAM_INFO_V2 {
            assert_eq!(len, 12, "a parameter record is 12 bytes");
            let ordinal = u16::from_le_bytes([cubin[at + 8], cubin[at + 9]]);
            records.push(Record {
                at,
                in_section: at - start,
                ordinal,
            });
        }
        at += 4 + if format == EIFMT_SVAL { len } else { 0 };
    }
    records
}

/// The record of `ordinal`.
fn record(records: &[Record], ordinal: u16) -> Record {
    *records.iter().find(|r| r.ordinal == ordinal).unwrap()
}

/// Writes `value` (little-endian, 2 bytes) at byte `field` of the value of the record at `at`:
/// 4 the ordinal, 6 the offset, 8 the size.
fn set(cubin: &mut [u8], at: usize, field: usize, value: u16) {
    cubin[at + 4 + field..at + 6 + field].copy_from_slice(&value.to_le_bytes());
}

/// Asserts that every way of reading `cubin`'s parameters of `kernel` fails, naming the section
/// and then saying what `expected` says: the offline layout, the inspection (a note, and the
/// kernel's `params_error` with no parameters), and a fatbin holding only that cubin. A fatbin
/// that also holds the kernel's PTX gives the PTX's layout, `layout`.
fn refused(cubin: &[u8], kernel: &str, expected: &str, layout: &[ParamLayout], what: &str) {
    let says = |text: &str| text.contains(&format!(".nv.info.{kernel}: {expected}"));
    let image = Image::new(cubin).unwrap();
    let error = image.param_layout(kernel).unwrap_err();
    assert!(
        matches!(error, Error::MalformedImage { .. }) && says(&error.to_string()),
        "{what}: {error}"
    );
    let inspection = image.inspect().unwrap();
    let cudyn::inspect::Contents::Cubin(inspected) = &inspection.contents else {
        panic!("{what}: not a cubin");
    };
    let found = inspected.kernel(kernel).unwrap();
    let reason = found.params_error.as_ref().map(ToString::to_string);
    assert!(reason.as_deref().is_some_and(says), "{what}: {reason:?}");
    assert!(found.params.is_empty(), "{what}");
    assert!(
        inspected.notes.iter().any(|note| says(note)),
        "{what}: {:?}",
        inspected.notes
    );
    assert!(inspection.param_layout(kernel).is_err(), "{what}");

    let mut alone = FatbinBuilder::new().unwrap();
    alone.add_cubin(cubin, Arch::new(9, 0), "damaged").unwrap();
    let alone = alone.finish().unwrap();
    let error = Image::new(&alone[..])
        .unwrap()
        .param_layout(kernel)
        .unwrap_err();
    assert!(
        says(&error.to_string()) && error.to_string().contains("fatbin entry 0"),
        "{what}: {error}"
    );
    let ptx = fixtures::compile_source(
        LARGE_PARAMS,
        &[],
        &["-arch=compute_90"],
        fixtures::Output::Ptx,
    );
    let mut with_ptx = FatbinBuilder::new().unwrap();
    with_ptx
        .add_cubin(cubin, Arch::new(9, 0), "damaged")
        .unwrap();
    with_ptx.add_ptx(&ptx, Arch::new(9, 0), "whole").unwrap();
    let with_ptx = with_ptx.finish().unwrap();
    let from_ptx = Image::new(&with_ptx[..]).unwrap().param_layout(kernel);
    assert_eq!(from_ptx.unwrap(), layout, "{what}: the PTX's layout");
}

#[test]
fn damaged_v2_parameter_tables_are_errors_naming_the_attribute() {
    let kernel = "kernelLargeParam";
    for (compiler, cubin) in cubins() {
        let layout = Image::new(&cubin[..])
            .unwrap()
            .param_layout(kernel)
            .unwrap();
        assert_eq!(
            layout,
            [
                ParamLayout {
                    offset: 0,
                    size: 32000
                },
                ParamLayout {
                    offset: 32000,
                    size: 8
                }
            ],
            "{compiler}"
        );
        let records = v2_records(&cubin, kernel);
        assert_eq!(records.len(), 2, "{compiler}: {records:?}");
        let (first, second) = (record(&records, 0), record(&records, 1));

        let damaged = |damage: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = cubin.clone();
            damage(&mut bytes);
            bytes
        };
        // The second record's ordinal, offset or size (fields 4, 6, 8 of its value) changed.
        let fields: [(&str, usize, u16, &str); 4] = [
            (
                "ordinal 1 given as 2",
                4,
                2,
                v2!("ordinal 2: no record gives ordinal 1"),
            ),
            (
                "both records of ordinal 0",
                4,
                0,
                v2!("ordinal 0: two records"),
            ),
            (
                "the pointer inside the struct",
                6,
                31_996,
                v2!("ordinal 1: its bytes 31996..32004 overlap those of ordinal 0"),
            ),
            (
                "the pointer past the buffer",
                8,
                16,
                v2!("ordinal 1: its bytes 32000..32016 end past the 32008-byte"),
            ),
        ];
        let mut cases: Vec<(&str, Vec<u8>, String)> = fields
            .into_iter()
            .map(|(what, field, value, expected)| {
                let bytes = damaged(&|bytes| set(bytes, second.at, field, value));
                (what, bytes, expected.to_owned())
            })
            .collect();
        cases.extend([
            (
                // Its last 4 bytes become an attribute without a value (format EIFMT_NVAL, code
                // 0xff), so that the list still reads to its end.
                "the first record cut to 8 bytes",
                damaged(&|bytes| {
                    bytes[first.at + 2] = 8;
                    bytes[first.at + 12..first.at + 16].copy_from_slice(&[0x01, 0xff, 0, 0]);
                }),
                format!(
                    "EIATTR_KPARAM_INFO_V2 (0x45) at byte {} holds 8 bytes; a parameter record is 12",
                    first.in_section
                ),
            ),
            (
                // Code 0x46: the parameters take bytes, but no record cudyn reads describes them.
                "records of a format cudyn does not know",
                damaged(&|bytes| {
                    for record in &records {
                        bytes[record.at + 1] = KPARAM_INFO_V2 + 1;
                    }
                }),
                "EIATTR_CBANK_PARAM_SIZE declares 32008 bytes of parameters, but no \
                 EIATTR_KPARAM_INFO or EIATTR_KPARAM_INFO_V2 record describes them"
                    .to_owned(),
            ),
        ]);
        for (what, bytes, expected) in &cases {
            refused(
                bytes,
                kernel,
                expected,
                &layout,
                &format!("{compiler}: {what}"),
            );
            // Each damage leaves the other kernels' tables readable.
            let image = Image::new(&bytes[..]).unwrap();
            assert_eq!(image.param_layout("kernel4k").unwrap().len(), 2, "{what}");
        }
        // The driver would read 12 bytes of the short record: a load refuses it.
        let short = &cases[4].1;
        let error = Image::new(&short[..]).unwrap().validate().unwrap_err();
        assert!(
            error
                .to_string()
                .contains("attribute EIATTR_KPARAM_INFO_V2 (0x45) at byte"),
            "{compiler}: {error}"
        );
    }
}

#[test]
fn a_v2_record_naming_a_symbol_past_the_table_is_refused_for_a_load() {
    // The driver's loader reads the symbol table at a record's first word, as at a register
    // count's: checked for both record formats.
    for (compiler, cubin) in cubins() {
        let symbols = ElfFile64::<LittleEndian>::parse(&cubin[..])
            .unwrap()
            .symbols()
            .count()
            + 1; // `symbols()` leaves out the null symbol
        let first = v2_records(&cubin, "kernelLargeParam")[0];
        for index in [symbols as u32, 0x7fff_0000] {
            let mut damaged = cubin.clone();
            damaged[first.at + 4..first.at + 8].copy_from_slice(&index.to_le_bytes());
            let error = Image::new(&damaged[..]).unwrap().validate().unwrap_err();
            let text = error.to_string();
            assert!(
                matches!(error, Error::MalformedImage { .. })
                    && text.contains(".nv.info.kernelLargeParam")
                    && text.contains(&format!(
                        "EIATTR_KPARAM_INFO_V2 (0x45) at byte {} names symbol {index} of \
                         {symbols}",
                        first.in_section
                    )),
                "{compiler}: {text}"
            );
        }
        Image::new(&cubin[..]).unwrap().validate().unwrap();
    }
}

#[test]
fn arguments_of_the_wrong_size_for_large_parameters_are_refused() {
    // The device address of `long long *result`, as the launch passes it.
    let result = 0u64;
    let large = (ParamLarge { a: [1; 8000] }, result);
    let small = (Param4k { a: [1; 1024] }, result);
    let short = (ParamLargeShort { a: [1; 7999] }, result);
    let mismatch = |expected, given| {
        Err(ArgumentMismatch::Size {
            index: 0,
            expected,
            given,
        })
    };
    for (compiler, cubin) in cubins() {
        let image = Image::new(&cubin[..]).unwrap();
        let large_params = image.param_layout("kernelLargeParam").unwrap();
        let small_params = image.param_layout("kernel4k").unwrap();
        // Each kernel's own argument; one int short; the 4,096-byte struct for the 32,000-byte
        // parameter and the other way round.
        let cases = [
            (&large_params, large.layouts(), Ok(())),
            (&small_params, small.layouts(), Ok(())),
            (&large_params, short.layouts(), mismatch(32000, 31996)),
            (&large_params, small.layouts(), mismatch(32000, 4096)),
            (&small_params, large.layouts(), mismatch(4096, 32000)),
        ];
        for (index, (params, args, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                check_arguments(params, args),
                expected,
                "{compiler}: {index}"
            );
        }
    }
}

#[test]
fn a_kernel_without_its_attribute_section_has_unknown_parameters_not_none() {
    for (compiler, cubin) in cubins() {
        // `.nv.info.kernel4k` renamed `.nv.inf0.kernel4k`: the kernel keeps its symbol, but no
        // section lists its parameters.
        let elf = ElfFile64::<LittleEndian>::parse(&cubin[..]).unwrap();
        let info = elf.section_by_name(".nv.info.kernel4k").unwrap();
        let names = elf.elf_header().e_shstrndx(LittleEndian) as usize;
        let (names_at, _) = elf
            .section_by_index(object::SectionIndex(names))
            .unwrap()
            .file_range()
            .unwrap();
        let name_at = names_at as usize + info.elf_section_header().sh_name(LittleEndian) as usize;
        assert_eq!(&cubin[name_at..name_at + 8], b".nv.info", "{compiler}");
        let mut renamed = cubin.clone();
        renamed[name_at + 7] = b'0';
        let image = Image::new(&renamed[..]).unwrap();
        let error = image.param_layout("kernel4k").unwrap_err();
        let expected = ".nv.info.kernel4k: the kernel's attribute section is missing";
        assert!(
            matches!(error, Error::MalformedImage { .. }) && error.to_string().contains(expected),
            "{compiler}: {error}"
        );
        let inspection = image.inspect().unwrap();
        let cudyn::inspect::Contents::Cubin(inspected) = &inspection.contents else {
            panic!("{compiler}: not a cubin");
        };
        let kernel = inspected.kernel("kernel4k").unwrap();
        assert!(
            kernel.params.is_empty() && kernel.params_error.is_some(),
            "{compiler}"
        );
        // A kernel the cubin does not define is still not found.
        assert!(matches!(
            image.param_layout("kernel5k").unwrap_err(),
            Error::KernelNotInImage { .. }
        ));
    }
}
