//! Typed values behind `cudyn run`'s untyped command line: scalars read as their type, buffer
//! contents generated or read, and buffers summarized after the launch.
//!
//! Each element type is one Rust type implementing [`Element`]; [`with_element!`] picks it from
//! an [`ElemType`], so every operation is written once, generically.

use std::fmt;
use std::str::FromStr;

use serde_json::{Number, Value};

use super::spec::{ElemType, Fill};

/// A scalar argument's bits, in an integer of its size and alignment: the kernel receives bytes,
/// and a parameter is checked by its size and offset alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarBits {
    B1(u8),
    B2(u16),
    B4(u32),
    B8(u64),
}

/// A value of one of the element types.
pub trait Element: bytemuck::Pod + PartialOrd + fmt::Display + FromStr {
    /// Element `index` of a range: the index as this type (integers wrap).
    fn from_index(index: usize) -> Self;
    /// A random value: floats uniform in [0, 1), integers uniform in 0..100.
    fn random(rng: &mut fastrand::Rng) -> Self;
    /// Whether the value is a floating-point NaN.
    fn is_nan(self) -> bool;
    /// The sum of the values other than NaNs: exact for integers, in f64 for floats.
    fn sum(values: &[Self]) -> Value;
    /// The value's bits, as the kernel receives them.
    fn bits(self) -> ScalarBits;
    /// Whether `text`, read as this value, was a number too large for the type (floats read it
    /// as an infinity): an infinity is written as one (`inf`).
    fn overflowed(self, text: &str) -> bool;
    /// The largest finite value of the type, as messages write it.
    fn largest() -> String;
}

macro_rules! integer_element {
    ($($ty:ident => $bits:ident),*) => { $(
        impl Element for $ty {
            fn from_index(index: usize) -> Self {
                index as $ty
            }
            fn random(rng: &mut fastrand::Rng) -> Self {
                rng.u8(0..100) as $ty
            }
            fn is_nan(self) -> bool {
                false
            }
            fn sum(values: &[Self]) -> Value {
                number(values.iter().map(|&v| i128::from(v)).sum::<i128>())
            }
            fn bits(self) -> ScalarBits {
                ScalarBits::$bits(bytemuck::cast(self))
            }
            fn overflowed(self, _: &str) -> bool {
                // Reading an integer fails instead.
                false
            }
            fn largest() -> String {
                $ty::MAX.to_string()
            }
        }
    )* };
}
integer_element!(i8 => B1, u8 => B1, i16 => B2, u16 => B2, i32 => B4, u32 => B4, i64 => B8, u64 => B8);

macro_rules! float_element {
    ($($ty:ident => $bits:ident),*) => { $(
        impl Element for $ty {
            fn from_index(index: usize) -> Self {
                index as $ty
            }
            fn random(rng: &mut fastrand::Rng) -> Self {
                rng.$ty()
            }
            fn is_nan(self) -> bool {
                $ty::is_nan(self)
            }
            fn sum(values: &[Self]) -> Value {
                // A fold from +0.0: `Sum` starts from -0.0, which an empty buffer would show.
                let sum = values
                    .iter()
                    .filter(|v| !v.is_nan())
                    .fold(0.0, |sum, &v| sum + f64::from(v));
                number(sum)
            }
            fn bits(self) -> ScalarBits {
                ScalarBits::$bits(bytemuck::cast(self))
            }
            fn overflowed(self, text: &str) -> bool {
                let spelled = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
                self.is_infinite() && spelled != "inf" && spelled != "infinity"
            }
            fn largest() -> String {
                format!("{:e}", $ty::MAX)
            }
        }
    )* };
}
float_element!(f32 => B4, f64 => B8);

/// Evaluates `$body` with `$T` the Rust type of the element type `$ty`.
macro_rules! with_element {
    ($ty:expr, $T:ident => $body:expr) => {
        with_element!(@each $ty, $T, $body,
            I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64, F32 f32, F64 f64)
    };
    (@each $ty:expr, $T:ident, $body:expr, $($variant:ident $rust:ident),*) => {
        match $ty {
            $(ElemType::$variant => {
                type $T = $rust;
                $body
            })*
        }
    };
}

/// A JSON number written as the value displays, so an f32 keeps its shortest form (`0.1`, not
/// `0.10000000149011612`); null for NaN and infinities, which JSON cannot hold.
fn number(value: impl fmt::Display) -> Value {
    Number::from_str(&value.to_string()).map_or(Value::Null, Value::Number)
}

fn parse<T: Element>(ty: ElemType, text: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    let value: T = text
        .parse()
        .map_err(|error| format!("`{text}` is not a value of type {ty} ({error})"))?;
    if value.overflowed(text) {
        return Err(format!(
            "`{text}` is too large for {ty}, whose largest finite value is {}; write inf for \
             infinity",
            T::largest()
        ));
    }
    Ok(value)
}

/// The bits of `text` read as a `ty`.
pub fn scalar(ty: ElemType, text: &str) -> Result<ScalarBits, String> {
    with_element!(ty, T => parse::<T>(ty, text).map(Element::bits))
}

/// Checks that `text` reads as a `ty`, for the command-line parser.
pub fn check_scalar(ty: ElemType, text: &str) -> Result<(), String> {
    scalar(ty, text).map(drop)
}

/// `count` elements of `ty` made as `fill` says, as bytes. `argument` (the buffer's position)
/// seeds random elements unless `fill` names a seed.
pub fn generate(
    ty: ElemType,
    count: usize,
    fill: &Fill,
    argument: usize,
) -> Result<Vec<u8>, String> {
    /// The bytes of `count` elements, in one allocation that may fail: a count too large for
    /// this machine's memory is the user's to fix, not a crash.
    fn make<T: Element>(
        count: usize,
        mut element: impl FnMut(usize) -> T,
    ) -> Result<Vec<u8>, String> {
        let too_many = || {
            format!(
                "{count} elements of {} bytes do not fit in memory",
                size_of::<T>()
            )
        };
        let size = count.checked_mul(size_of::<T>()).ok_or_else(too_many)?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(size).map_err(|_| too_many())?;
        for index in 0..count {
            bytes.extend_from_slice(bytemuck::bytes_of(&element(index)));
        }
        Ok(bytes)
    }
    with_element!(ty, T => match fill {
        Fill::Value(value) => {
            let value: T = parse(ty, value)?;
            make(count, |_| value)
        }
        Fill::Range => make(count, T::from_index),
        Fill::Random { seed } => {
            let mut rng = fastrand::Rng::with_seed(seed.unwrap_or(argument as u64));
            make(count, |_| T::random(&mut rng))
        }
    })
}

/// What a buffer holds: its first elements, extremes, sum and NaN count, as JSON numbers (null
/// where there is none, or for NaN and infinities).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Elements in the buffer.
    pub elements: usize,
    /// The first [`FIRST_SHOWN`] elements.
    pub first: Vec<Value>,
    /// The least element other than NaN.
    pub min: Value,
    /// The greatest element other than NaN.
    pub max: Value,
    /// The sum of the elements other than NaN: exact for integers, in f64 for floats.
    pub sum: Value,
    /// NaN elements (0 for integers).
    pub nan: usize,
}

/// Elements shown at the start of each buffer.
pub const FIRST_SHOWN: usize = 8;

/// The summary of `bytes` read as elements of `ty`; a trailing partial element is ignored.
pub fn summarize(ty: ElemType, bytes: &[u8]) -> Summary {
    fn of<T: Element>(bytes: &[u8]) -> Summary {
        let whole = bytes.len() - bytes.len() % size_of::<T>();
        let values: Vec<T> = bytemuck::pod_collect_to_vec(&bytes[..whole]);
        let mut numbers = values.iter().copied().filter(|v| !v.is_nan());
        let first = numbers.next();
        let (min, max) = numbers.fold((first, first), |(min, max), v| {
            let lower = |held: Option<T>| held.filter(|&m| m <= v).or(Some(v));
            let higher = |held: Option<T>| held.filter(|&m| m >= v).or(Some(v));
            (lower(min), higher(max))
        });
        Summary {
            elements: values.len(),
            first: values
                .iter()
                .take(FIRST_SHOWN)
                .map(|&v| number(v))
                .collect(),
            min: min.map_or(Value::Null, number),
            max: max.map_or(Value::Null, number),
            sum: T::sum(&values),
            nan: values.iter().filter(|v| v.is_nan()).count(),
        }
    }
    with_element!(ty, T => of::<T>(bytes))
}

/// The size of one element of `ty`.
pub fn element_size(ty: ElemType) -> usize {
    with_element!(ty, T => size_of::<T>())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scalars_become_the_bits_of_their_type() {
        assert_eq!(
            scalar(ElemType::F32, "2.5"),
            Ok(ScalarBits::B4(2.5f32.to_bits()))
        );
        assert_eq!(
            scalar(ElemType::I32, "-3"),
            Ok(ScalarBits::B4((-3i32) as u32))
        );
        assert_eq!(
            scalar(ElemType::U64, "1048576"),
            Ok(ScalarBits::B8(1 << 20))
        );
        assert_eq!(
            scalar(ElemType::F64, "-0.5"),
            Ok(ScalarBits::B8((-0.5f64).to_bits()))
        );
        assert_eq!(scalar(ElemType::I8, "-128"), Ok(ScalarBits::B1(0x80)));
        assert_eq!(scalar(ElemType::U16, "65535"), Ok(ScalarBits::B2(0xffff)));
        let error = scalar(ElemType::U8, "256").unwrap_err();
        assert!(
            error.starts_with("`256` is not a value of type u8 ("),
            "{error}"
        );
    }

    #[test]
    fn contents_are_filled_ranged_and_seeded() {
        let floats = |bytes: Vec<u8>| bytemuck::pod_collect_to_vec::<u8, f32>(&bytes);
        let fill = Fill::Value("2.5".into());
        assert_eq!(
            floats(generate(ElemType::F32, 3, &fill, 0).unwrap()),
            [2.5, 2.5, 2.5]
        );
        let range = generate(ElemType::I16, 4, &Fill::Range, 0).unwrap();
        assert_eq!(
            bytemuck::pod_collect_to_vec::<u8, i16>(&range),
            [0, 1, 2, 3]
        );
        let wrapped = generate(ElemType::U8, 258, &Fill::Range, 0).unwrap();
        assert_eq!(&wrapped[254..], [254, 255, 0, 1]);

        let random = |seed, argument| {
            let fill = Fill::Random { seed };
            floats(generate(ElemType::F32, 1000, &fill, argument).unwrap())
        };
        let values = random(None, 1);
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        assert_eq!(values, random(None, 1), "a fixed seed repeats");
        assert_ne!(values, random(None, 2), "each argument has its own seed");
        assert_eq!(random(Some(2), 7), random(None, 2), "random:SEED names it");
        let ints = generate(ElemType::I64, 1000, &Fill::Random { seed: Some(5) }, 0).unwrap();
        let ints = bytemuck::pod_collect_to_vec::<u8, i64>(&ints);
        assert!(ints.iter().all(|v| (0..100).contains(v)));
        assert!(ints.iter().any(|&v| v != ints[0]));

        for count in [usize::MAX, usize::MAX / 2] {
            let error = generate(ElemType::F64, count, &Fill::Range, 0).unwrap_err();
            assert!(
                error.ends_with("elements of 8 bytes do not fit in memory"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_summary_skips_nans_and_keeps_floats_short() {
        let values = [0.1f32, f32::NAN, -2.0, 3.5, f32::NAN];
        let summary = summarize(ElemType::F32, bytemuck::cast_slice(&values));
        assert_eq!(
            serde_json::to_value(&summary).unwrap(),
            json!({
                "elements": 5,
                // Whole floats are written as integers, as they display.
                "first": [0.1, null, -2, 3.5, null],
                "min": -2,
                "max": 3.5,
                "sum": f64::from(0.1f32) - 2.0 + 3.5,
                "nan": 2,
            })
        );
        assert_eq!(serde_json::to_string(&summary.first[0]).unwrap(), "0.1");
    }

    #[test]
    fn floats_in_json_read_back_exactly_as_their_type() {
        let mut rng = fastrand::Rng::with_seed(11);
        let values: Vec<f32> = (0..20_000)
            .map(|_| f32::from_bits(rng.u32(..)))
            .filter(|v| v.is_finite())
            .collect();
        for chunk in values.chunks(FIRST_SHOWN) {
            let summary = summarize(ElemType::F32, bytemuck::cast_slice(chunk));
            let json = serde_json::to_string(&summary.first).unwrap();
            let read: Vec<serde_json::Number> = serde_json::from_str(&json).unwrap();
            for (number, value) in read.iter().zip(chunk) {
                let back: f32 = number.to_string().parse().unwrap();
                assert_eq!(back.to_bits(), value.to_bits(), "{json}");
            }
        }
    }

    #[test]
    fn integer_sums_are_exact_beyond_64_bits() {
        let values = [u64::MAX, u64::MAX, 1];
        let summary = summarize(ElemType::U64, bytemuck::cast_slice(&values));
        assert_eq!(summary.min, json!(1));
        assert_eq!(summary.max, json!(u64::MAX));
        assert_eq!(summary.nan, 0);
        // 2^65 - 1 does not fit a JSON integer here; it is written as the nearest float.
        assert_eq!(summary.sum, json!(2f64.powi(65)));
        let small = summarize(ElemType::I8, bytemuck::cast_slice(&[-128i8, 127, -1]));
        assert_eq!(small.sum, json!(-2));
        assert_eq!(small.first, [json!(-128), json!(127), json!(-1)]);
    }

    #[test]
    fn an_empty_or_all_nan_buffer_has_no_extremes() {
        let empty = summarize(ElemType::F64, &[]);
        assert_eq!(
            (empty.elements, &empty.min, &empty.max),
            (0, &Value::Null, &Value::Null)
        );
        assert_eq!(empty.sum, json!(0));
        let nans = summarize(ElemType::F64, bytemuck::cast_slice(&[f64::NAN; 3]));
        assert_eq!((nans.nan, &nans.min), (3, &Value::Null));
        assert_eq!(element_size(ElemType::F64), 8);
        assert_eq!(element_size(ElemType::I16), 2);
    }
}
