//! The command line of `cudyn run`, read into typed values: element types, kernel arguments
//! (`--arg`), grid and block dimensions, and buffers to write back (`--out`).
//!
//! Every type here implements `FromStr` with a message that says what was expected, so clap
//! reports a malformed value as a usage error (exit status 2) naming the option.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use cudyn::Dim3;

/// The element types of scalars and buffers, named as in Rust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemType {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl ElemType {
    const ALL: [ElemType; 10] = [
        ElemType::I8,
        ElemType::U8,
        ElemType::I16,
        ElemType::U16,
        ElemType::I32,
        ElemType::U32,
        ElemType::I64,
        ElemType::U64,
        ElemType::F32,
        ElemType::F64,
    ];

    /// The type's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ElemType::I8 => "i8",
            ElemType::U8 => "u8",
            ElemType::I16 => "i16",
            ElemType::U16 => "u16",
            ElemType::I32 => "i32",
            ElemType::U32 => "u32",
            ElemType::I64 => "i64",
            ElemType::U64 => "u64",
            ElemType::F32 => "f32",
            ElemType::F64 => "f64",
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ElemType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        ElemType::ALL
            .into_iter()
            .find(|ty| ty.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = ElemType::ALL.iter().map(|ty| ty.name()).collect();
                format!("unknown type `{text}`: use one of {}", names.join(", "))
            })
    }
}

/// What a buffer holds before the launch.
#[derive(Debug, Clone, PartialEq)]
pub enum Contents {
    /// `count` elements made as `fill` says (`COUNT[=INIT]`).
    Generated { count: usize, fill: Fill },
    /// The bytes of a file (`@FILE`), as many elements as it holds.
    File(PathBuf),
}

/// How the elements of a generated buffer are made.
#[derive(Debug, Clone, PartialEq)]
pub enum Fill {
    /// Each is the value written (`=2.5`; `0` when nothing is written).
    Value(String),
    /// 0, 1, 2, ... (`=range`).
    Range,
    /// Drawn from a generator seeded with `seed` (`=random`, `=random:SEED`); `None` seeds with
    /// the argument's position.
    Random { seed: Option<u64> },
}

/// One kernel argument as written after `--arg`.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgSpec {
    /// `TYPE:VALUE`, passed by value. The value is kept as written and read as the type when
    /// the argument list is built, so that one parser serves scalars and buffer fills.
    Scalar { ty: ElemType, value: String },
    /// `buf:TYPE:COUNT[=INIT]` or `buf:TYPE:@FILE`: device memory, passed as its address.
    Buffer { ty: ElemType, contents: Contents },
}

impl FromStr for ArgSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let Some((head, rest)) = text.split_once(':') else {
            return Err(format!(
                "`{text}` is not TYPE:VALUE or buf:TYPE:COUNT[=INIT]: write e.g. f32:2.5, \
                 u64:1024 or buf:f32:1024=0"
            ));
        };
        if head != "buf" {
            let ty: ElemType = head.parse()?;
            crate::run::values::check_scalar(ty, rest)?;
            return Ok(ArgSpec::Scalar {
                ty,
                value: rest.to_owned(),
            });
        }
        let Some((ty, size)) = rest.split_once(':') else {
            return Err(format!(
                "buffer `{text}` has no size: write buf:TYPE:COUNT[=INIT] or buf:TYPE:@FILE"
            ));
        };
        let ty: ElemType = ty.parse()?;
        if let Some(file) = size.strip_prefix('@') {
            if file.is_empty() {
                return Err(format!("buffer `{text}` names no file after `@`"));
            }
            return Ok(ArgSpec::Buffer {
                ty,
                contents: Contents::File(PathBuf::from(file)),
            });
        }
        let (count, init) = size.split_once('=').unwrap_or((size, "0"));
        let count: usize = count.parse().map_err(|_| {
            format!("buffer `{text}`: `{count}` is not an element count (a whole number)")
        })?;
        let fill = match init {
            "range" => Fill::Range,
            "random" => Fill::Random { seed: None },
            _ => match init.strip_prefix("random:") {
                Some(seed) => Fill::Random {
                    seed: Some(seed.parse().map_err(|_| {
                        format!("buffer `{text}`: the random seed `{seed}` is not a whole number")
                    })?),
                },
                None => {
                    crate::run::values::check_scalar(ty, init).map_err(|error| {
                        format!(
                            "buffer `{text}`: {error}; the fill is a value, range, random or \
                             random:SEED"
                        )
                    })?;
                    Fill::Value(init.to_owned())
                }
            },
        };
        Ok(ArgSpec::Buffer {
            ty,
            contents: Contents::Generated { count, fill },
        })
    }
}

/// Grid or block dimensions: `N` or `X,Y` or `X,Y,Z`, each at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims(pub Dim3);

impl FromStr for Dims {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let axes: Vec<&str> = text.split(',').collect();
        if axes.len() > 3 {
            return Err(format!(
                "`{text}` has more than three dimensions: write N or X,Y,Z"
            ));
        }
        let mut extent = [1u32; 3];
        for (slot, axis) in extent.iter_mut().zip(&axes) {
            *slot = axis.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("`{axis}` in `{text}` is not a dimension: each is a whole number from 1")
            })?;
        }
        let [x, y, z] = extent;
        Ok(Dims(Dim3 { x, y, z }))
    }
}

impl fmt::Display for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Dim3 { x, y, z } = self.0;
        write!(f, "{x}x{y}x{z}")
    }
}

/// `--out INDEX=FILE`: write the buffer passed as argument INDEX to FILE after the launch.
#[derive(Debug, Clone, PartialEq)]
pub struct OutSpec {
    /// The argument's position, from 0, as `cudyn inspect` numbers parameters.
    pub argument: usize,
    /// Where its bytes go.
    pub path: PathBuf,
}

impl FromStr for OutSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (index, path) = text
            .split_once('=')
            .filter(|(_, path)| !path.is_empty())
            .ok_or_else(|| format!("`{text}` is not INDEX=FILE, e.g. 3=out.bin"))?;
        let argument = index.trim_start_matches('#').parse().map_err(|_| {
            format!("`{index}` in `{text}` is not an argument index (0 for the first)")
        })?;
        Ok(OutSpec {
            argument,
            path: PathBuf::from(path),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(text: &str) -> ArgSpec {
        text.parse()
            .unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    fn refused(text: &str) -> String {
        match text.parse::<ArgSpec>() {
            Ok(spec) => panic!("{text} was read as {spec:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn scalars_keep_their_type_and_text() {
        assert_eq!(
            arg("f32:2.5"),
            ArgSpec::Scalar {
                ty: ElemType::F32,
                value: "2.5".into()
            }
        );
        assert_eq!(
            arg("i32:-3"),
            ArgSpec::Scalar {
                ty: ElemType::I32,
                value: "-3".into()
            }
        );
        assert_eq!(
            arg("u64:1048576"),
            ArgSpec::Scalar {
                ty: ElemType::U64,
                value: "1048576".into()
            }
        );
        for ty in ElemType::ALL {
            assert_eq!(ty.name().parse::<ElemType>(), Ok(ty));
        }
    }

    #[test]
    fn buffers_are_filled_ranged_random_or_read() {
        let buffer = |ty, count, fill| ArgSpec::Buffer {
            ty,
            contents: Contents::Generated { count, fill },
        };
        let zero = Fill::Value("0".into());
        assert_eq!(
            arg("buf:f32:1024=0"),
            buffer(ElemType::F32, 1024, zero.clone())
        );
        assert_eq!(arg("buf:f32:16"), buffer(ElemType::F32, 16, zero));
        assert_eq!(
            arg("buf:f32:1048576=random"),
            buffer(ElemType::F32, 1 << 20, Fill::Random { seed: None })
        );
        assert_eq!(
            arg("buf:f64:8=random:42"),
            buffer(ElemType::F64, 8, Fill::Random { seed: Some(42) })
        );
        assert_eq!(
            arg("buf:i32:16=range"),
            buffer(ElemType::I32, 16, Fill::Range)
        );
        assert_eq!(
            arg("buf:f32:@input.bin"),
            ArgSpec::Buffer {
                ty: ElemType::F32,
                contents: Contents::File("input.bin".into())
            }
        );
    }

    #[test]
    fn malformed_arguments_say_what_to_write() {
        assert!(refused("f33:1").contains("unknown type `f33`: use one of i8,"));
        assert!(refused("buf:float:4").contains("unknown type `float`"));
        assert!(refused("2.5").contains("is not TYPE:VALUE"));
        assert!(refused("i32:2.5").contains("`2.5` is not a value of type i32"));
        assert!(refused("u8:256").contains("`256` is not a value of type u8"));
        assert!(refused("u32:-1").contains("`-1` is not a value of type u32"));
        assert!(refused("buf:f32").contains("has no size"));
        assert!(refused("buf:f32:many").contains("`many` is not an element count"));
        assert!(refused("buf:f32:-4").contains("is not an element count"));
        assert!(refused("buf:f32:4=lots").contains("the fill is a value, range, random"));
        assert!(refused("buf:i32:4=1.5").contains("`1.5` is not a value of type i32"));
        assert!(refused("buf:f32:4=random:x").contains("seed `x`"));
        assert!(refused("buf:f32:@").contains("names no file"));
        assert!(refused("f32:1e999").contains("`1e999` is too large for f32"));
        assert!(refused("f64:-1e309").contains("too large for f64"));
        assert!(refused("buf:f32:2=3.5e38").contains("too large for f32"));
        for infinite in ["f32:inf", "f32:-inf", "f64:+Infinity", "f32:1e-999"] {
            arg(infinite);
        }
    }

    #[test]
    fn dimensions_are_one_to_three_positive_extents() {
        let dims = |text: &str| text.parse::<Dims>().map(|d| d.0);
        assert_eq!(dims("256"), Ok(Dim3 { x: 256, y: 1, z: 1 }));
        assert_eq!(dims("16,8"), Ok(Dim3 { x: 16, y: 8, z: 1 }));
        assert_eq!(dims("4, 2, 3"), Ok(Dim3 { x: 4, y: 2, z: 3 }));
        assert_eq!(Dims(Dim3 { x: 4, y: 2, z: 3 }).to_string(), "4x2x3");
        for bad in ["0", "", "1,2,3,4", "x", "-1", "1,,2", "4294967296"] {
            assert!(dims(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn outputs_name_an_argument_and_a_file() {
        assert_eq!(
            "3=out.bin".parse(),
            Ok(OutSpec {
                argument: 3,
                path: "out.bin".into()
            })
        );
        assert_eq!(
            "#1=a=b".parse::<OutSpec>().map(|o| o.path),
            Ok("a=b".into())
        );
        for bad in ["out.bin", "x=out.bin", "3=", "-1=f"] {
            assert!(bad.parse::<OutSpec>().is_err(), "{bad}");
        }
    }
}
