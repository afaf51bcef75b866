//! A kernel's parameter table: the parameter records of its `.nv.info.<kernel>` section and the
//! size of its parameter buffer (`EIATTR_CBANK_PARAM_SIZE`), read and checked whole.
//!
//! Each parameter has one 12-byte record: a 32-bit index (0 in every compiler's output), a
//! 16-bit ordinal (its place in the declaration), a 16-bit byte offset, then
//! - `EIATTR_KPARAM_INFO` (0x17): a 32-bit word whose bits 18..32 are the size (14 bits, so at
//!   most 16 383 bytes), bits 0..8 the log2 alignment of a pointer's pointee and 8..12 its space;
//! - `EIATTR_KPARAM_INFO_V2` (0x45): a 16-bit size, then the pointee's log2 alignment and its
//!   space, a byte each.
//!
//! ptxas (alone, in nvcc and in NVRTC, for sm_75 to sm_121 in CUDA 13.0) writes V2 records for
//! every parameter of a kernel whose parameter buffer takes more than 4352 bytes (parameters of
//! up to 32 764 bytes, `__grid_constant__`, need CUDA 12.1), V1 records otherwise, never both for
//! one kernel. The records come last parameter first.
//!
//! A table cudyn cannot read whole is an error naming the attribute, never a shorter list: a
//! record of another format or too short, two records of one ordinal, an ordinal missing below
//! the highest, parameters that overlap or end past the buffer, or a buffer with bytes but no
//! record describing them (a format this version of cudyn does not know).

use object::pod::{self, Pod};
use object::{LittleEndian as LE, U16, U32};

use super::info::{attr, Attribute, Attributes, Value};
use crate::param::ParamLayout;
use crate::parse_error::{Fault, ParseError, Problem};

/// A parameter record of `EIATTR_KPARAM_INFO`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[allow(
    dead_code,
    reason = "the fields cudyn does not read are named for the layout"
)]
struct KparamInfo {
    /// 0 in every compiler's output.
    index: U32<LE>,
    /// The parameter's place in the declaration.
    ordinal: U16<LE>,
    /// Its byte offset in the parameter buffer.
    offset: U16<LE>,
    /// Bits 18..32: its size; 8..12: a pointer's space; 0..8: its pointee's log2 alignment.
    info: U32<LE>,
}

/// A parameter record of `EIATTR_KPARAM_INFO_V2`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
#[allow(
    dead_code,
    reason = "the fields cudyn does not read are named for the layout"
)]
struct KparamInfoV2 {
    /// 0 in every compiler's output.
    index: U32<LE>,
    /// The parameter's place in the declaration.
    ordinal: U16<LE>,
    /// Its byte offset in the parameter buffer.
    offset: U16<LE>,
    /// Its size in bytes.
    size: U16<LE>,
    /// A pointer's pointee's log2 alignment.
    log2_align: u8,
    /// A pointer's space.
    space: u8,
}

// SAFETY: both are `repr(C)` structs of bytes and of object's byte-array integers (alignment 1,
// the `unaligned` feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for KparamInfo {}
// SAFETY: as above.
unsafe impl Pod for KparamInfoV2 {}

/// A parameter record is 12 bytes, in either form.
const RECORD_LEN: usize = std::mem::size_of::<KparamInfo>();
const _: () = assert!(std::mem::size_of::<KparamInfoV2>() == RECORD_LEN);

/// Whether the attribute `code` is one the parameter table reads, whose problems
/// [`read`] reports.
pub(crate) fn reads(code: u8) -> bool {
    matches!(
        code,
        attr::KPARAM_INFO | attr::KPARAM_INFO_V2 | attr::CBANK_PARAM_SIZE
    )
}

/// One parameter record.
#[derive(Debug, Clone, Copy)]
struct Record {
    code: u8,
    ordinal: u16,
    layout: ParamLayout,
}

impl Record {
    /// Names the record in messages: `EIATTR_KPARAM_INFO_V2 ordinal 3`.
    fn describe(&self) -> String {
        format!("{} ordinal {}", attr::name(self.code), self.ordinal)
    }

    /// The bytes the parameter spans, for messages: `8..16`.
    fn span(&self) -> String {
        format!("{}..{}", self.layout.offset, self.layout.end())
    }
}

/// The parameters of `kernel` (its symbol) in declaration order, read from its attribute list
/// `info` (the contents of `.nv.info.<kernel>`); an error naming the attribute when the table
/// cannot be read whole. A kernel without parameter records whose buffer is empty or not
/// declared takes no parameters.
pub(crate) fn read(info: &[u8], kernel: &str) -> Result<Vec<ParamLayout>, ParseError> {
    let place = || format!(".nv.info.{kernel}");
    let error = |message: String| ParseError::new(place(), Problem::Damaged, message);
    let mut records = Vec::new();
    let mut buffer = None;
    let mut attributes = Attributes::new(info);
    for attribute in attributes.by_ref() {
        match attribute.code {
            attr::KPARAM_INFO | attr::KPARAM_INFO_V2 => {
                records.push(record(&attribute).map_err(|fault| fault.at(place()))?);
            }
            attr::CBANK_PARAM_SIZE => {
                let size = attribute.value.number().ok_or_else(|| {
                    error(format!(
                        "{} is not a number: the parameter buffer's size cannot be read",
                        attribute.describe()
                    ))
                })?;
                buffer = Some(size);
            }
            _ => {}
        }
    }
    if let Some(offset) = attributes.damaged_at {
        return Err(error(format!(
            "the attribute at byte {offset} is damaged or runs past the section's end, so the \
             parameter records after it cannot be read"
        )));
    }
    check(&mut records, buffer).map_err(|fault| fault.at(place()))?;
    Ok(records.into_iter().map(|record| record.layout).collect())
}

/// Decodes one parameter record.
fn record(attribute: &Attribute<'_>) -> Result<Record, Fault> {
    let Value::Bytes(bytes) = attribute.value else {
        return Err(Fault::new(
            Problem::Damaged,
            format!(
                "{} holds no bytes; a parameter record is {RECORD_LEN}",
                attribute.describe()
            ),
        ));
    };
    let too_short = |()| {
        Fault::new(
            Problem::Damaged,
            format!(
                "{} holds {} bytes; a parameter record is {RECORD_LEN}",
                attribute.describe(),
                bytes.len()
            ),
        )
    };
    let (ordinal, offset, size) = if attribute.code == attr::KPARAM_INFO_V2 {
        let (record, _) = pod::from_bytes::<KparamInfoV2>(bytes).map_err(too_short)?;
        (
            record.ordinal,
            record.offset,
            u32::from(record.size.get(LE)),
        )
    } else {
        let (record, _) = pod::from_bytes::<KparamInfo>(bytes).map_err(too_short)?;
        (record.ordinal, record.offset, record.info.get(LE) >> 18)
    };
    Ok(Record {
        code: attribute.code,
        ordinal: ordinal.get(LE),
        layout: ParamLayout {
            offset: usize::from(offset.get(LE)),
            size: usize::try_from(size).unwrap_or_default(),
        },
    })
}

/// Puts `records` in declaration order and checks that they describe one parameter list that
/// fits a buffer of `buffer` bytes (when declared).
fn check(records: &mut [Record], buffer: Option<u32>) -> Result<(), Fault> {
    let damaged = |message: String| Fault::new(Problem::Damaged, message);
    if records.is_empty() {
        return match buffer {
            Some(bytes) if bytes > 0 => Err(Fault::new(
                Problem::Unsupported,
                format!(
                    "{} declares {bytes} bytes of parameters, but no {} or {} record describes \
                 them: the kernel's parameters are recorded in a form this version of cudyn \
                 does not read",
                    attr::name(attr::CBANK_PARAM_SIZE),
                    attr::name(attr::KPARAM_INFO),
                    attr::name(attr::KPARAM_INFO_V2),
                ),
            )),
            _ => Ok(()),
        };
    }
    records.sort_by_key(|record| record.ordinal);
    for (index, record) in records.iter().enumerate() {
        if usize::from(record.ordinal) == index {
            continue;
        }
        // The records before are ordinals 0 to index - 1: this one repeats the last of them,
        // or comes after a missing one.
        let before = index.checked_sub(1).and_then(|before| records.get(before));
        return Err(damaged(match before {
            Some(before) if before.ordinal == record.ordinal => format!(
                "{}: two records give this ordinal (bytes {} and {})",
                record.describe(),
                before.span(),
                record.span()
            ),
            _ => format!(
                "{}: no record gives ordinal {index}, so a parameter before it is not described",
                record.describe()
            ),
        }));
    }
    let mut by_offset: Vec<&Record> = records.iter().filter(|r| r.layout.size > 0).collect();
    by_offset.sort_by_key(|record| record.layout.offset);
    for pair in by_offset.windows(2) {
        let [before, record] = pair else { continue };
        if record.layout.offset < before.layout.end() {
            return Err(damaged(format!(
                "{}: its bytes {} overlap those of ordinal {} ({})",
                record.describe(),
                record.span(),
                before.ordinal,
                before.span()
            )));
        }
    }
    if let Some(bytes) = buffer {
        if let Some(past) = records
            .iter()
            .find(|record| record.layout.end() > bytes as usize)
        {
            return Err(damaged(format!(
                "{}: its bytes {} end past the {bytes}-byte parameter buffer {} declares",
                past.describe(),
                past.span(),
                attr::name(attr::CBANK_PARAM_SIZE)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attribute list of parameter records (value bytes as cuobjdump's samples give them,
    /// `EIFMT_SVAL`) and, when given, `EIATTR_CBANK_PARAM_SIZE` (`EIFMT_HVAL`).
    fn list(records: &[(u8, &str)], buffer: Option<u16>) -> Vec<u8> {
        let mut out = Vec::new();
        for (code, hex) in records {
            let value: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            out.extend([0x04, *code, value.len() as u8, 0]);
            out.extend(value);
        }
        if let Some(bytes) = buffer {
            out.extend([0x03, attr::CBANK_PARAM_SIZE]);
            out.extend(bytes.to_le_bytes());
        }
        out
    }

    fn layout(pairs: &[(usize, usize)]) -> Vec<ParamLayout> {
        pairs
            .iter()
            .map(|&(offset, size)| ParamLayout { offset, size })
            .collect()
    }

    const V1: u8 = attr::KPARAM_INFO;
    const V2: u8 = attr::KPARAM_INFO_V2;

    #[test]
    fn both_record_formats_read_as_cuobjdump_reads_them() {
        // nvcc, sm_90: `k4k(param_4k_t p, int *result)`, records last parameter first.
        let v1 = list(
            &[
                (V1, "000000000100001000f02100"),
                (V1, "000000000000000000f00140"),
            ],
            Some(0x1008),
        );
        assert_eq!(read(&v1, "k").unwrap(), layout(&[(0, 4096), (4096, 8)]));
        // ptxas, sm_90: pointers to aligned data in spaces 5 and 1 around 32,000 bytes; the
        // bytes after the 16-bit size are the pointee's log2 alignment and space.
        let v2 = list(
            &[
                (V2, "000000000200087d08000105"),
                (V2, "0000000001000800007d0000"),
                (V2, "000000000000000008000a01"),
            ],
            Some(0x7d10),
        );
        let expected = layout(&[(0, 8), (8, 32000), (32008, 8)]);
        assert_eq!(read(&v2, "k").unwrap(), expected);
    }

    #[test]
    fn a_kernel_without_records_takes_no_parameters_only_when_its_buffer_is_empty() {
        assert_eq!(read(&list(&[], None), "k").unwrap(), []);
        assert_eq!(read(&list(&[], Some(0)), "k").unwrap(), []);
        let error = read(&list(&[], Some(16)), "k").unwrap_err();
        assert_eq!(error.place, ".nv.info.k");
        assert!(error.message.contains("declares 16 bytes"), "{error}");
    }

    #[test]
    fn records_that_do_not_read_whole_are_errors_naming_them() {
        let cases: [(Vec<u8>, &str); 5] = [
            // A record in a 16-bit value.
            (
                [0x03, V2, 0x08, 0x00].to_vec(),
                "EIATTR_KPARAM_INFO_V2 (0x45) at byte 0 holds no bytes",
            ),
            (
                list(&[(V1, "0000000000000000")], None),
                "EIATTR_KPARAM_INFO (0x17) at byte 0 holds 8 bytes",
            ),
            (
                list(
                    &[(V2, "000000000000000008000000"), (V2, "000000000000080008000000")],
                    None,
                ),
                "EIATTR_KPARAM_INFO_V2 ordinal 0: two records give this ordinal (bytes 0..8 and 8..16)",
            ),
            (
                list(&[(V2, "000000000100080008000000")], None),
                "EIATTR_KPARAM_INFO_V2 ordinal 1: no record gives ordinal 0",
            ),
            // Cut inside the second record.
            (
                list(&[(V1, "000000000000000000f02100"), (V1, "0000")], None)[..18].to_vec(),
                "the attribute at byte 16 is damaged",
            ),
        ];
        for (info, expected) in cases {
            let error = read(&info, "k").unwrap_err();
            assert!(error.to_string().starts_with(".nv.info.k: "), "{error}");
            assert!(error.message.contains(expected), "{error}");
        }
    }

    #[test]
    fn parameters_may_not_overlap_or_pass_the_buffer() {
        let overlapping = [
            (V1, "000000000100040000f02100"),
            (V1, "000000000000000000f02100"),
        ];
        let past = [(V2, "000000000000000010000000")];
        for (records, buffer, expected) in [
            (
                &overlapping[..],
                16,
                "ordinal 1: its bytes 4..12 overlap those of ordinal 0 (0..8)",
            ),
            (
                &past[..],
                8,
                "ordinal 0: its bytes 0..16 end past the 8-byte",
            ),
        ] {
            let error = read(&list(records, Some(buffer)), "k").unwrap_err();
            assert!(error.message.contains(expected), "{error}");
        }
        // A 1-byte parameter, padding, then an 8-byte one: as compilers lay them out.
        let padded = list(
            &[
                (V1, "000000000100080000f02100"),
                (V1, "000000000000000000f00500"),
            ],
            Some(16),
        );
        assert_eq!(read(&padded, "k").unwrap(), layout(&[(0, 1), (8, 8)]));
    }
}
