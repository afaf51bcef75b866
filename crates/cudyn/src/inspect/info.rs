//! The attribute lists of a cubin's `.nv.info`, `.nv.info.<kernel>` and `.nv.compat` sections.
//!
//! Each attribute is a format byte, an attribute code, then two bytes that are the value (none,
//! a byte, a 16-bit value) or the length of the value bytes that follow.

use super::u16_at;

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
    /// In `.nv.compat` (`EICOMPAT_ATTR_*` numbering): 1 for architecture-specific code.
    pub const COMPAT_ACCELERATOR_TARGET: u8 = 0x09;
}

const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;

/// One attribute's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    None,
    Half(u16),
    Bytes(&'a [u8]),
}

impl Value<'_> {
    /// The value as a number, whichever of the short formats holds it.
    pub(crate) fn number(self) -> Option<u32> {
        match self {
            Value::Half(v) => Some(v.into()),
            Value::Bytes(bytes) => super::u32_at(bytes, 0),
            Value::None => None,
        }
    }

    /// The value as consecutive little-endian 32-bit words.
    pub(crate) fn words(self) -> Vec<u32> {
        match self {
            Value::Bytes(bytes) => bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Where the attribute list `data` is damaged, as [`Attributes::damaged_at`] says after reading
/// it all, without decoding a value: `None` when it reads to its end.
pub(crate) fn first_damage(data: &[u8]) -> Option<usize> {
    let mut rest = data;
    let damage = |rest: &[u8]| Some(data.len() - rest.len());
    while let Some((&[format, _, low, high], values)) = rest.split_first_chunk() {
        rest = match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => values,
            EIFMT_SVAL => match values.get(usize::from(u16::from_le_bytes([low, high]))..) {
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

/// The first attribute of the list `data` that names a symbol by an index `symbols` or above, or
/// whose value is too short to hold the index, as its code and its value's first word (or 0):
/// the attributes of a function that start with its symbol (its register count, frame and stack
/// sizes, parameters and constant bank; cuobjdump names `EIATTR_KPARAM_INFO`'s first word an
/// index, 0 in every compiler's output), and every word of a list of external symbols. The
/// driver's loader and nvJitLink read the symbol table at these indices without checking them.
pub(crate) fn symbol_out_of_range(data: &[u8], symbols: usize) -> Option<(u8, u32)> {
    const STARTS_WITH_SYMBOL: [u8; 6] = [
        attr::PARAM_CBANK,
        attr::FRAME_SIZE,
        attr::MIN_STACK_SIZE,
        attr::KPARAM_INFO,
        attr::MAX_STACK_SIZE,
        attr::REGCOUNT,
    ];
    let out_of_range = |index: u32| usize::try_from(index).map_or(true, |index| index >= symbols);
    Attributes::new(data).find_map(|(code, value)| {
        if !matches!(value, Value::Bytes(_)) {
            return None;
        }
        let words = value.words();
        let named = match code {
            attr::EXTERNS => words.into_iter().find(|&index| out_of_range(index)),
            code if STARTS_WITH_SYMBOL.contains(&code) => match words.first() {
                Some(&index) => Some(index).filter(|&index| out_of_range(index)),
                None => Some(0),
            },
            _ => None,
        };
        named.map(|index| (code, index))
    })
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

    fn read(&self) -> Option<(u8, Value<'a>, usize)> {
        let format = *self.data.get(self.offset)?;
        let code = *self.data.get(self.offset + 1)?;
        let (value, len) = match format {
            EIFMT_NVAL => (Value::None, 4),
            EIFMT_BVAL => (Value::Half(u16::from(*self.data.get(self.offset + 2)?)), 4),
            EIFMT_HVAL => (Value::Half(u16_at(self.data, self.offset + 2)?), 4),
            EIFMT_SVAL => {
                let size = usize::from(u16_at(self.data, self.offset + 2)?);
                let start = self.offset + 4;
                (Value::Bytes(self.data.get(start..start + size)?), 4 + size)
            }
            _ => return None,
        };
        Some((code, value, len))
    }
}

impl<'a> Iterator for Attributes<'a> {
    type Item = (u8, Value<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.offset >= self.data.len() || self.damaged_at.is_some() {
            return None;
        }
        match self.read() {
            Some((code, value, len)) => {
                self.offset += len;
                Some((code, value))
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
