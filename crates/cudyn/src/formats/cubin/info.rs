//! The attribute lists of a cubin's `.nv.info`, `.nv.info.<kernel>` and `.nv.compat` sections,
//! which the inspection of a cubin and its check before a load both read.
//!
//! Each attribute is an [`AttributeHeader`]: a format byte, an attribute code, then two bytes
//! that are the value (none, a byte, a 16-bit value) or the length of the value bytes that
//! follow.

use object::pod::{self, Pod};
use object::{LittleEndian as LE, U32};

/// Attribute codes cudyn reads (NVIDIA's `EIATTR_*` numbering, as `cuobjdump -elf` names them).
pub(crate) mod attr {
    pub const MAX_THREADS: u8 = 0x05;
    pub const PARAM_CBANK: u8 = 0x0a;
    pub const EXTERNS: u8 = 0x0f;
    pub const REQNTID: u8 = 0x10;
    pub const FRAME_SIZE: u8 = 0x11;
    pub const MIN_STACK_SIZE: u8 = 0x12;
    pub const KPARAM_INFO: u8 = 0x17;
    pub const CBANK_PARAM_SIZE: u8 = 0x19;
    pub const MAXREG_COUNT: u8 = 0x1b;
    pub const MAX_STACK_SIZE: u8 = 0x23;
    pub const REGCOUNT: u8 = 0x2f;
    /// A parameter record for kernels whose parameters take more than 4352 bytes (CUDA 12.1+).
    pub const KPARAM_INFO_V2: u8 = 0x45;
    /// In `.nv.compat` (`EICOMPAT_ATTR_*` numbering): 1 for architecture-specific code.
    pub const COMPAT_ACCELERATOR_TARGET: u8 = 0x09;

    /// The `.nv.info` attribute `code` as cuobjdump names it, e.g. `EIATTR_KPARAM_INFO_V2`, or
    /// as its number for codes cudyn does not read.
    pub fn name(code: u8) -> std::borrow::Cow<'static, str> {
        let name = match code {
            MAX_THREADS => "EIATTR_MAX_THREADS",
            PARAM_CBANK => "EIATTR_PARAM_CBANK",
            EXTERNS => "EIATTR_EXTERNS",
            REQNTID => "EIATTR_REQNTID",
            FRAME_SIZE => "EIATTR_FRAME_SIZE",
            MIN_STACK_SIZE => "EIATTR_MIN_STACK_SIZE",
            KPARAM_INFO => "EIATTR_KPARAM_INFO",
            CBANK_PARAM_SIZE => "EIATTR_CBANK_PARAM_SIZE",
            MAXREG_COUNT => "EIATTR_MAXREG_COUNT",
            MAX_STACK_SIZE => "EIATTR_MAX_STACK_SIZE",
            REGCOUNT => "EIATTR_REGCOUNT",
            KPARAM_INFO_V2 => "EIATTR_KPARAM_INFO_V2",
            _ => return format!("attribute {code:#04x}").into(),
        };
        name.into()
    }
}

const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;

/// The four bytes that start every attribute.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct AttributeHeader {
    /// How the value is stored: `EIFMT_*`.
    format: u8,
    /// What the attribute is: `EIATTR_*` ([`attr`]).
    code: u8,
    /// The value of a byte (the first of the two) or 16-bit value, or the length of the value
    /// bytes that follow (little-endian).
    value: [u8; 2],
}

impl AttributeHeader {
    /// The two value bytes as a 16-bit number: a 16-bit value, or the length of value bytes.
    fn half(&self) -> u16 {
        u16::from_le_bytes(self.value)
    }
}

/// The value of an attribute about one function (`EIATTR_REGCOUNT`, the stack and frame sizes):
/// its symbol index, then an amount.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub(super) struct FunctionValue {
    /// The function's index in the symbol table.
    pub(super) symbol: U32<LE>,
    /// Registers or bytes.
    pub(super) amount: U32<LE>,
}

// SAFETY: both are `repr(C)` structs of bytes and of object's byte-array integers (alignment 1,
// the `unaligned` feature), so they have no padding and every bit pattern is a valid value.
unsafe impl Pod for AttributeHeader {}
// SAFETY: as above.
unsafe impl Pod for FunctionValue {}

/// One attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    None,
    Half(u16),
    Bytes(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The value as a number, whichever of the short formats holds it: of value bytes, the
    /// first 32-bit word.
    pub(crate) fn number(self) -> Option<u32> {
        match self {
            Value::Half(v) => Some(v.into()),
            Value::Bytes(bytes) => first_word(bytes),
            Value::None => None,
        }
    }

    /// The value as consecutive little-endian 32-bit words.
    pub(crate) fn words(self) -> Vec<u32> {
        match self {
            Value::Bytes(bytes) => {
                let words = pod::slice_from_bytes::<U32<LE>>(bytes, bytes.len() / 4)
                    .map_or(&[][..], |(words, _)| words);
                words.iter().map(|word| word.get(LE)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The value as a function's symbol index and an amount, when it holds those bytes.
    pub(crate) fn function(self) -> Option<&'a FunctionValue> {
        match self {
            Value::Bytes(bytes) => pod::from_bytes(bytes).ok().map(|(value, _)| value),
            _ => None,
        }
    }
}

/// The first little-endian 32-bit word of `bytes`, when they hold one.
fn first_word(bytes: &[u8]) -> Option<u32> {
    pod::from_bytes::<U32<LE>>(bytes)
        .ok()
        .map(|(word, _)| word.get(LE))
}

/// Where the attribute list `data` is damaged, as [`Attributes::damaged_at`] says after reading
/// it all, without decoding a value: `None` when it reads to its end.
pub(crate) fn first_damage(data: &[u8]) -> Option<usize> {
    let mut rest = data;
    let damage = |rest: &[u8]| Some(data.len() - rest.len());
    while let Ok((header, values)) = pod::from_bytes::<AttributeHeader>(rest) {
        rest = match header.format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => values,
            EIFMT_SVAL => match values.get(usize::from(header.half())..) {
                Some(after) => after,
                None => return damage(rest),
            },
            _ => return damage(rest),
        };
    }
    // Fewer than 4 bytes left: whole when they hold all that their format reads, as `Attributes`
    // reads them (a format and code, then a byte value's byte).
    match *rest {
        [] | [EIFMT_NVAL, _, ..] | [EIFMT_BVAL, _, _] => None,
        _ => damage(rest),
    }
}

/// What readers take of the value of attribute `code`, for the attributes of a `.nv.info`
/// section that the driver's loader, nvJitLink or cudyn read at fixed places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A function's symbol index, then `len - 4` bytes about it (`len` at least).
    Symbol { len: u8 },
    /// `len` bytes or more (block dimensions), no symbol.
    Bytes { len: u8 },
    /// A number: a 16-bit or byte value, or the first word of longer bytes.
    Number,
    /// A list of symbol indices (`EIATTR_EXTERNS`), each a word.
    Symbols,
}

const fn shape(code: u8) -> Option<Shape> {
    Some(match code {
        // A symbol, then its value: u16 offset and u16 size for the constant bank.
        attr::PARAM_CBANK
        | attr::FRAME_SIZE
        | attr::MIN_STACK_SIZE
        | attr::MAX_STACK_SIZE
        | attr::REGCOUNT => Shape::Symbol { len: 8 },
        // cuobjdump names a parameter record's first word an index; 0 in every compiler's output.
        attr::KPARAM_INFO | attr::KPARAM_INFO_V2 => Shape::Symbol { len: 12 },
        attr::MAX_THREADS | attr::REQNTID => Shape::Bytes { len: 12 },
        attr::CBANK_PARAM_SIZE | attr::MAXREG_COUNT => Shape::Number,
        attr::EXTERNS => Shape::Symbols,
        _ => return None,
    })
}

/// Why an attribute cannot be read where its readers read it: found without building text, so
/// that the check every load makes of every attribute costs no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// The value holds less than readers take: `len` bytes.
    TooShort { len: u8 },
    /// The value bytes are not a whole number of 4-byte symbol indices.
    NotWords,
    /// It names a symbol at or past the symbol count.
    PastSymbols { index: u32, count: usize },
}

/// The [`Flaw`] of an attribute of `code` holding `value`, if it has one; symbol indices are
/// compared with `symbols` when the count is known.
fn flaw(code: u8, value: Value<'_>, symbols: Option<usize>) -> Option<Flaw> {
    let shape = shape(code)?;
    let past = |index: u32| {
        let count = symbols?;
        usize::try_from(index)
            .map_or(true, |index| index >= count)
            .then_some(Flaw::PastSymbols { index, count })
    };
    match (shape, value) {
        (Shape::Number, Value::Half(_)) => None,
        (Shape::Number, value) => value
            .number()
            .is_none()
            .then_some(Flaw::TooShort { len: 4 }),
        (Shape::Symbol { len } | Shape::Bytes { len }, Value::Bytes(bytes))
            if bytes.len() < usize::from(len) =>
        {
            Some(Flaw::TooShort { len })
        }
        (Shape::Symbol { .. }, Value::Bytes(bytes)) => past(first_word(bytes)?),
        (Shape::Bytes { .. }, Value::Bytes(_)) => None,
        (Shape::Symbols, Value::Bytes(bytes)) if bytes.len() % 4 != 0 => Some(Flaw::NotWords),
        (Shape::Symbols, Value::Bytes(bytes)) => bytes
            .chunks_exact(4)
            .find_map(|word| past(u32::from_le_bytes([word[0], word[1], word[2], word[3]]))),
        (Shape::Symbols, _) => None,
        (Shape::Symbol { len } | Shape::Bytes { len }, _) => Some(Flaw::TooShort { len }),
    }
}

/// Why `attribute` of a `.nv.info` section cannot be read where its readers read it, if it
/// cannot: a value of another format or shorter than they take, or a symbol index at or past
/// `symbols` (when the symbol count is known). The driver's loader and nvJitLink read the
/// symbol table at those indices without checking them, and take the value's bytes as long as
/// these attributes always are.
pub(crate) fn unreadable(attribute: &Attribute<'_>, symbols: Option<usize>) -> Option<String> {
    let what = match attribute.value {
        Value::None => "no value".to_owned(),
        Value::Half(_) => "a 16-bit value".to_owned(),
        Value::Bytes(bytes) => format!("{} value bytes", bytes.len()),
    };
    Some(match flaw(attribute.code, attribute.value, symbols)? {
        Flaw::TooShort { len } => format!("holds {what}; readers take {len} bytes"),
        Flaw::NotWords => format!("holds {what}, not a whole number of 4-byte symbol indices"),
        Flaw::PastSymbols { index, count } => format!("names symbol {index} of {count}"),
    })
}

/// The first attribute of the `.nv.info` list `data` that is [`unreadable`], with why; `None`
/// when every one reads (attributes past damage to the list itself are not looked at: see
/// [`first_damage`]).
pub(crate) fn first_unreadable(data: &[u8], symbols: usize) -> Option<(Attribute<'_>, String)> {
    Attributes::new(data).find_map(|attribute| {
        unreadable(&attribute, Some(symbols)).map(|problem| (attribute, problem))
    })
}

/// Whether the attribute list `data` is sound: [`first_damage`] finds nothing and, when
/// `symbols` is given (a `.nv.info` list), neither does [`first_unreadable`]. One pass over the
/// bytes that builds nothing: every load of a cubin runs it on every list, and nearly always
/// finds them sound; the two functions above then say where and why when it does not.
pub(crate) fn is_sound(data: &[u8], symbols: Option<usize>) -> bool {
    let Some(count) = symbols else {
        return first_damage(data).is_none();
    };
    let below = |word: &[u8; 4]| {
        usize::try_from(u32::from_le_bytes(*word)).is_ok_and(|index| index < count)
    };
    let mut rest = data;
    while let Some((&[format, code, low, high], values)) = rest.split_first_chunk::<4>() {
        let need = NEEDS[usize::from(code)];
        rest = match format {
            EIFMT_SVAL => {
                let Some((bytes, after)) =
                    values.split_at_checked(usize::from(u16::from_le_bytes([low, high])))
                else {
                    return false;
                };
                let readable = bytes.len() >= usize::from(need.least_bytes)
                    && match need.symbols {
                        Words::None => true,
                        Words::First => bytes.first_chunk::<4>().is_some_and(below),
                        Words::All => match bytes.as_chunks::<4>() {
                            (words, []) => words.iter().all(below),
                            _ => false,
                        },
                    };
                if !readable {
                    return false;
                }
                after
            }
            EIFMT_NVAL if need.without_value => values,
            EIFMT_BVAL | EIFMT_HVAL if need.with_short_value => values,
            _ => return false,
        };
    }
    // Fewer than 4 bytes left: as `first_damage` and `Attributes` read them.
    match *rest {
        [] => true,
        [EIFMT_NVAL, code, ..] => NEEDS[usize::from(code)].without_value,
        [EIFMT_BVAL, code, _] => NEEDS[usize::from(code)].with_short_value,
        _ => false,
    }
}

/// What [`is_sound`] asks of an attribute of one code: its [`Shape`] as a few fields read
/// without a match, since the check reads it for every attribute of every load.
#[derive(Debug, Clone, Copy)]
struct Need {
    /// The fewest value bytes readers take, when the value is bytes (`EIFMT_SVAL`).
    least_bytes: u8,
    /// Which words of value bytes are symbol indices.
    symbols: Words,
    /// Whether the attribute reads without a value (`EIFMT_NVAL`).
    without_value: bool,
    /// Whether it reads with a byte or 16-bit value (`EIFMT_BVAL`, `EIFMT_HVAL`).
    with_short_value: bool,
}

/// Which 4-byte words of an attribute's value bytes are symbol indices.
#[derive(Debug, Clone, Copy)]
enum Words {
    None,
    First,
    /// Every one, and the bytes are whole words.
    All,
}

/// The [`Need`] of every code, from [`shape`]: what [`flaw`] finds no flaw in.
static NEEDS: [Need; 256] = {
    let mut needs = [Need {
        least_bytes: 0,
        symbols: Words::None,
        without_value: true,
        with_short_value: true,
    }; 256];
    let mut code = 0;
    while code < needs.len() {
        if let Some(shape) = shape(code as u8) {
            needs[code] = match shape {
                Shape::Symbol { len } => Need {
                    least_bytes: len,
                    symbols: Words::First,
                    without_value: false,
                    with_short_value: false,
                },
                Shape::Bytes { len } => Need {
                    least_bytes: len,
                    symbols: Words::None,
                    without_value: false,
                    with_short_value: false,
                },
                Shape::Number => Need {
                    least_bytes: 4,
                    symbols: Words::None,
                    without_value: false,
                    with_short_value: true,
                },
                Shape::Symbols => Need {
                    least_bytes: 0,
                    symbols: Words::All,
                    without_value: true,
                    with_short_value: true,
                },
            };
        }
        code += 1;
    }
    needs
};

/// One attribute of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attribute<'a> {
    /// Where it starts in its list, in bytes.
    pub(crate) offset: usize,
    pub(crate) code: u8,
    pub(crate) value: Value<'a>,
}

impl Attribute<'_> {
    /// Names the attribute in messages: `EIATTR_REGCOUNT (0x2f) at byte 16`.
    pub(crate) fn describe(&self) -> String {
        match attr::name(self.code) {
            std::borrow::Cow::Borrowed(name) => {
                format!("{name} ({:#04x}) at byte {}", self.code, self.offset)
            }
            unknown => format!("{unknown} at byte {}", self.offset),
        }
    }
}

/// Iterates over the attributes in `data`; stops at the first one that does not fit, recording
/// where in [`Attributes::damaged_at`].
pub(crate) struct Attributes<'a> {
    data: &'a [u8],
    offset: usize,
    pub(crate) damaged_at: Option<usize>,
}

impl<'a> Attributes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Attributes {
            data,
            offset: 0,
            damaged_at: None,
        }
    }

    fn read(&self) -> Option<(Attribute<'a>, usize)> {
        let rest = self.data.get(self.offset..)?;
        let header_len = std::mem::size_of::<AttributeHeader>();
        let (code, value, len) = match pod::from_bytes::<AttributeHeader>(rest) {
            Ok((header, values)) => {
                let value = match header.format {
                    EIFMT_NVAL => Value::None,
                    EIFMT_BVAL => Value::Half(u16::from(header.value[0])),
                    EIFMT_HVAL => Value::Half(header.half()),
                    EIFMT_SVAL => Value::Bytes(values.get(..usize::from(header.half()))?),
                    _ => return None,
                };
                let len = match value {
                    Value::Bytes(bytes) => header_len + bytes.len(),
                    _ => header_len,
                };
                (header.code, value, len)
            }
            // The last attribute may end early where its format reads no more: without a
            // value, or after its byte value.
            Err(()) => match *rest {
                [EIFMT_NVAL, code, ..] => (code, Value::None, header_len),
                [EIFMT_BVAL, code, byte] => (code, Value::Half(u16::from(byte)), header_len),
                _ => return None,
            },
        };
        let attribute = Attribute {
            offset: self.offset,
            code,
            value,
        };
        Some((attribute, len))
    }
}

impl<'a> Iterator for Attributes<'a> {
    type Item = Attribute<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.offset >= self.data.len() || self.damaged_at.is_some() {
            return None;
        }
        match self.read() {
            Some((attribute, len)) => {
                self.offset += len;
                Some(attribute)
            }
            None => {
                self.damaged_at = Some(self.offset);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attribute(code: u8, value: Value<'_>) -> Attribute<'_> {
        Attribute {
            offset: 0,
            code,
            value,
        }
    }

    /// The one-pass check agrees with the two that say where and why, on lists built of the
    /// attributes cudyn reads (and others), every format, values short and long, symbol indices
    /// in and out of range, and cut at every length.
    #[test]
    fn the_one_pass_check_agrees_with_the_checks_that_explain() {
        let codes = [
            attr::REGCOUNT,
            attr::KPARAM_INFO,
            attr::MAX_THREADS,
            attr::CBANK_PARAM_SIZE,
            attr::EXTERNS,
            0x37,
        ];
        let mut random = fastrand::Rng::with_seed(0x5eed);
        let (mut sound, mut unsound) = (0, 0);
        for _ in 0..20_000 {
            let mut list = Vec::new();
            for _ in 0..random.usize(0..5) {
                let format = random.u8(0..6);
                // Half the codes are those cudyn reads, the others any byte at all.
                let code = match random.bool() {
                    true => codes[random.usize(..codes.len())],
                    false => random.u8(..),
                };
                match format {
                    EIFMT_SVAL => {
                        let len = [0, 3, 4, 8, 12, 13][random.usize(..6)];
                        let declared = if random.u8(..10) == 0 { len + 1 } else { len };
                        list.extend([format, code]);
                        list.extend((declared as u16).to_le_bytes());
                        list.extend((0..len).map(|_| random.u8(0..20)));
                    }
                    _ => list.extend([format, code, random.u8(..), random.u8(..)]),
                }
            }
            list.truncate(list.len() - random.usize(0..=list.len().min(3)));
            for symbols in [None, Some(random.usize(0..20))] {
                let explained = first_damage(&list).is_none()
                    && symbols.is_none_or(|count| first_unreadable(&list, count).is_none());
                assert_eq!(is_sound(&list, symbols), explained, "{list:?} {symbols:?}");
                if explained {
                    sound += 1;
                } else {
                    unsound += 1;
                }
            }
        }
        // Both verdicts were met many times: the comparison covered each.
        assert!(
            sound > 5_000 && unsound > 5_000,
            "{sound} sound, {unsound} not"
        );
    }

    #[test]
    fn attributes_read_at_fixed_places_must_hold_what_is_read() {
        let count = [0x0d, 0, 0, 0, 0x0c, 0, 0, 0];
        let readable = [
            attribute(attr::REGCOUNT, Value::Bytes(&count)),
            attribute(attr::CBANK_PARAM_SIZE, Value::Half(0x7d08)),
            attribute(
                attr::MAX_THREADS,
                Value::Bytes(&[128, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]),
            ),
            attribute(attr::EXTERNS, Value::Bytes(&count)),
            // Codes cudyn does not read are no concern of it.
            attribute(0x37, Value::Bytes(&[1])),
        ];
        for attribute in readable {
            assert_eq!(unreadable(&attribute, Some(14)), None, "{attribute:?}");
        }
        let cases = [
            (
                attribute(attr::REGCOUNT, Value::Bytes(&count[..4])),
                "holds 4 value bytes; readers take 8 bytes",
            ),
            (
                attribute(attr::REGCOUNT, Value::Half(12)),
                "holds a 16-bit value; readers take 8 bytes",
            ),
            (
                attribute(attr::REQNTID, Value::Bytes(&count)),
                "holds 8 value bytes; readers take 12 bytes",
            ),
            (
                attribute(attr::CBANK_PARAM_SIZE, Value::None),
                "holds no value; readers take 4 bytes",
            ),
            (
                attribute(attr::EXTERNS, Value::Bytes(&count[..6])),
                "not a whole number of 4-byte symbol indices",
            ),
            (
                attribute(attr::REGCOUNT, Value::Bytes(&count)),
                "names symbol 13 of 13",
            ),
            (
                attribute(attr::EXTERNS, Value::Bytes(&count)),
                "names symbol 13 of 13",
            ),
        ];
        for (attribute, expected) in cases {
            let problem = unreadable(&attribute, Some(13));
            assert!(
                problem.as_deref().is_some_and(|p| p.contains(expected)),
                "{problem:?}"
            );
        }
        // Without the symbol count, only the shape is checked.
        let past = attribute(attr::REGCOUNT, Value::Bytes(&count));
        assert_eq!(unreadable(&past, None), None);
    }

    #[test]
    fn the_quick_damage_check_finds_what_reading_every_attribute_finds() {
        let mut rng = fastrand::Rng::with_seed(13);
        for _ in 0..20_000 {
            let len = rng.usize(0..40);
            // Mostly the four formats, sometimes others; sizes small enough to fit or not.
            let data: Vec<u8> = (0..len)
                .map(|_| match rng.u8(0..8) {
                    0..=4 => rng.u8(0..6),
                    5 => rng.u8(0..12),
                    _ => rng.u8(..),
                })
                .collect();
            let mut attributes = Attributes::new(&data);
            attributes.by_ref().for_each(drop);
            assert_eq!(first_damage(&data), attributes.damaged_at, "{data:?}");
        }
    }
}
