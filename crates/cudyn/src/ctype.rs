//! The C types of kernel parameters and the C meaning of launch arguments, so that a launch can
//! refuse an `f32` for an `int` and not only an 8-byte value for a 4-byte parameter.
//!
//! A parameter's type ([`CType`]) is known as precisely as its source says:
//! - a C++ kernel's mangled name spells every parameter type (`_Z4axpyIfEvT_PKS0_PS0_i` is
//!   `(float, const float*, float*, int)`), read here from its demangled signature
//!   ([`param_types_of_symbol`]);
//! - PTX declares a width and whether a value is a float ([`CType::from_ptx`]): `.f32` is a
//!   `float`, but `.u32` is any 32-bit integer (NVRTC writes `.u32` for `int`), `.u64` is a
//!   64-bit integer or a pointer, and a struct, `__half` or `__nv_bfloat16` is only bytes;
//! - an `extern "C"` kernel known from a cubin alone has sizes only.
//!
//! An argument's meaning ([`ArgType`]) comes from its Rust type, at compile time: `i32` is
//! `int`, `&DeviceBuffer<f32>` is `const float*`, a derived struct is its `c_name`.

use std::borrow::Cow;
use std::fmt;

use crate::symbols::cpp_names;

/// A C scalar type, as CUDA C++ on a 64-bit Linux host has it (`long` is 64 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Scalar {
    /// `bool`.
    Bool,
    /// `char` (signed in CUDA C++).
    Char,
    /// `signed char`.
    SignedChar,
    /// `unsigned char`.
    UnsignedChar,
    /// `short`.
    Short,
    /// `unsigned short`.
    UnsignedShort,
    /// `int`.
    Int,
    /// `unsigned int`.
    UnsignedInt,
    /// `long` (64 bits).
    Long,
    /// `unsigned long` (64 bits; `size_t`).
    UnsignedLong,
    /// `long long`.
    LongLong,
    /// `unsigned long long`.
    UnsignedLongLong,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `__half`.
    Half,
    /// `__nv_bfloat16`.
    BFloat16,
}

/// What a value of a scalar type is, as far as passing it goes: two scalars of the same class
/// are the same argument (`long` and `long long`, `char` and `signed char`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Bool,
    Integer { bits: u8, signed: bool },
    Float { bits: u8 },
    Half,
    BFloat16,
}

impl Scalar {
    /// The C spelling: `unsigned int`, `__half`.
    pub const fn c_name(self) -> &'static str {
        match self {
            Scalar::Bool => "bool",
            Scalar::Char => "char",
            Scalar::SignedChar => "signed char",
            Scalar::UnsignedChar => "unsigned char",
            Scalar::Short => "short",
            Scalar::UnsignedShort => "unsigned short",
            Scalar::Int => "int",
            Scalar::UnsignedInt => "unsigned int",
            Scalar::Long => "long",
            Scalar::UnsignedLong => "unsigned long",
            Scalar::LongLong => "long long",
            Scalar::UnsignedLongLong => "unsigned long long",
            Scalar::Float => "float",
            Scalar::Double => "double",
            Scalar::Half => "__half",
            Scalar::BFloat16 => "__nv_bfloat16",
        }
    }

    /// The Rust type that passes it: `i32` for `int`, `u64` for `unsigned long`.
    pub const fn rust_name(self) -> &'static str {
        match self.class() {
            Class::Bool => "bool",
            Class::Integer { bits, signed } => match (bits, signed) {
                (8, true) => "i8",
                (8, false) => "u8",
                (16, true) => "i16",
                (16, false) => "u16",
                (32, true) => "i32",
                (32, false) => "u32",
                (_, true) => "i64",
                (_, false) => "u64",
            },
            Class::Float { bits: 32 } => "f32",
            Class::Float { .. } => "f64",
            Class::Half => "half::f16",
            Class::BFloat16 => "half::bf16",
        }
    }

    const fn class(self) -> Class {
        match self {
            Scalar::Bool => Class::Bool,
            Scalar::Char | Scalar::SignedChar => Class::Integer {
                bits: 8,
                signed: true,
            },
            Scalar::UnsignedChar => Class::Integer {
                bits: 8,
                signed: false,
            },
            Scalar::Short => Class::Integer {
                bits: 16,
                signed: true,
            },
            Scalar::UnsignedShort => Class::Integer {
                bits: 16,
                signed: false,
            },
            Scalar::Int => Class::Integer {
                bits: 32,
                signed: true,
            },
            Scalar::UnsignedInt => Class::Integer {
                bits: 32,
                signed: false,
            },
            Scalar::Long | Scalar::LongLong => Class::Integer {
                bits: 64,
                signed: true,
            },
            Scalar::UnsignedLong | Scalar::UnsignedLongLong => Class::Integer {
                bits: 64,
                signed: false,
            },
            Scalar::Float => Class::Float { bits: 32 },
            Scalar::Double => Class::Float { bits: 64 },
            Scalar::Half => Class::Half,
            Scalar::BFloat16 => Class::BFloat16,
        }
    }

    /// The width of an integer type, `None` for the others.
    const fn integer_bits(self) -> Option<u8> {
        match self.class() {
            Class::Integer { bits, .. } => Some(bits),
            _ => None,
        }
    }

    /// Whether both are integers of the same width (of either signedness).
    pub(crate) fn same_width_integer(self, other: Scalar) -> bool {
        self.integer_bits().is_some() && self.integer_bits() == other.integer_bits()
    }

    /// The scalar a C++ type name spells, as a demangler writes it.
    fn from_cpp(name: &str) -> Option<Scalar> {
        Some(match name {
            "bool" => Scalar::Bool,
            "char" => Scalar::Char,
            "signed char" => Scalar::SignedChar,
            "unsigned char" => Scalar::UnsignedChar,
            "short" => Scalar::Short,
            "unsigned short" => Scalar::UnsignedShort,
            "int" => Scalar::Int,
            "unsigned int" => Scalar::UnsignedInt,
            "long" => Scalar::Long,
            "unsigned long" => Scalar::UnsignedLong,
            "long long" => Scalar::LongLong,
            "unsigned long long" => Scalar::UnsignedLongLong,
            "float" => Scalar::Float,
            "double" => Scalar::Double,
            "__half" => Scalar::Half,
            "__nv_bfloat16" => Scalar::BFloat16,
            _ => return None,
        })
    }
}

/// The C type of a kernel parameter, as precisely as the device code says it. `Display` writes
/// the C spelling (`const float*`), or what is known (`32-bit integer`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum CType {
    /// A scalar: `int`, `float`, `__half`.
    Scalar(Scalar),
    /// A struct, class or union by its qualified C++ name: `Params`, `ns::Odd`, `float4`.
    Named(String),
    /// `void`, as a pointee.
    Void,
    /// A pointer, `const` when what it points to is.
    Pointer {
        /// What it points to; `None` when the type is one the check does not model (a
        /// function, an array).
        pointee: Option<Box<CType>>,
        /// Whether the pointee is `const`: the kernel promises not to write through it.
        is_const: bool,
    },
    /// An integer of `bits` bits whose signedness the source does not say (PTX's `.u32`).
    Integer {
        /// Its width.
        bits: u8,
    },
    /// A 64-bit integer or a pointer (PTX's `.u64` without `.ptr`).
    IntegerOrPointer,
    /// A pointer into a state space, its pointee not said (PTX's `.ptr .global`).
    PtxPointer {
        /// The state space, e.g. `.global`.
        space: String,
    },
}

impl fmt::Display for CType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CType::Scalar(scalar) => f.write_str(scalar.c_name()),
            CType::Named(name) => f.write_str(name),
            CType::Void => f.write_str("void"),
            CType::Pointer { pointee, is_const } => {
                let pointee = pointee.as_deref();
                match (pointee, is_const) {
                    (Some(inner @ CType::Pointer { .. }), true) => write!(f, "{inner} const*"),
                    (Some(inner @ CType::Pointer { .. }), false) => write!(f, "{inner}*"),
                    (Some(inner), true) => write!(f, "const {inner}*"),
                    (Some(inner), false) => write!(f, "{inner}*"),
                    (None, _) => f.write_str("pointer"),
                }
            }
            CType::Integer { bits } => write!(f, "{bits}-bit integer"),
            CType::IntegerOrPointer => f.write_str("64-bit integer or pointer"),
            CType::PtxPointer { space } => write!(f, "pointer into {space}"),
        }
    }
}

impl CType {
    /// The type a C++ type spells as a demangler writes it (`float const*`, `ns::Odd`,
    /// `unsigned int`); `None` for what the check does not model (references, function
    /// pointers, arrays, `decltype`).
    pub fn from_cpp(spelled: &str) -> Option<CType> {
        let spelled = spelled.trim();
        if let Some(pointee) = spelled.strip_suffix('*') {
            let pointee = pointee.trim_end();
            let (pointee, is_const) = match pointee.strip_suffix(" const") {
                Some(inner) => (inner, true),
                None => match pointee.strip_prefix("const ") {
                    Some(inner) if !inner.ends_with('*') => (inner, true),
                    _ => (pointee, false),
                },
            };
            let pointee = match pointee.trim() {
                "void" => Some(Box::new(CType::Void)),
                other => CType::from_cpp(other).map(Box::new),
            };
            return Some(CType::Pointer { pointee, is_const });
        }
        let spelled = spelled.strip_suffix(" const").unwrap_or(spelled);
        if let Some(scalar) = Scalar::from_cpp(spelled) {
            return Some(CType::Scalar(scalar));
        }
        let named = spelled
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && !spelled.contains(['(', '&', '[', ' ']);
        // `ns::Vec<float, 3>` is a name too; a space outside the template arguments is not.
        let templated = spelled.ends_with('>')
            && spelled
                .split_once('<')
                .is_some_and(|(name, _)| !name.contains(['(', '&', '[', ' ']));
        (named || templated).then(|| CType::Named(spelled.to_owned()))
    }

    /// What PTX's declaration of a parameter says: its type (`.f32`), its array length and the
    /// state space of a `.ptr`. Only what PTX really says: a width and float-or-integer, never
    /// signedness; `None` for bytes (`.b8[N]`, how structs, `__half` and `__nv_bfloat16` are
    /// passed) and untyped bits.
    pub fn from_ptx(ty: &str, count: Option<u64>, pointee_space: Option<&str>) -> Option<CType> {
        if count != Some(1) {
            return None;
        }
        if let Some(space) = pointee_space {
            return Some(CType::PtxPointer {
                space: space.to_owned(),
            });
        }
        Some(match ty {
            ".f32" => CType::Scalar(Scalar::Float),
            ".f64" => CType::Scalar(Scalar::Double),
            ".u64" => CType::IntegerOrPointer,
            ".s64" => CType::Integer { bits: 64 },
            ".u8" | ".s8" => CType::Integer { bits: 8 },
            ".u16" | ".s16" => CType::Integer { bits: 16 },
            ".u32" | ".s32" => CType::Integer { bits: 32 },
            _ => return None,
        })
    }

    /// Whether an argument of meaning `arg` passes this parameter soundly. An argument of
    /// unknown meaning passes (its size is checked apart).
    pub fn accepts(&self, arg: &ArgType) -> bool {
        match (self, arg) {
            (_, ArgType::Unknown) => true,
            (CType::Scalar(param), ArgType::Scalar(given)) => param.class() == given.class(),
            (CType::Scalar(param), ArgType::Reinterpreted(given)) => {
                param.same_width_integer(*given)
            }
            (CType::Integer { bits }, ArgType::Scalar(given) | ArgType::Reinterpreted(given)) => {
                given.integer_bits() == Some(*bits) || (*bits == 8 && given.class() == Class::Bool)
            }
            (CType::IntegerOrPointer, ArgType::Pointer { .. }) => true,
            (CType::IntegerOrPointer, ArgType::Scalar(given) | ArgType::Reinterpreted(given)) => {
                given.integer_bits() == Some(64)
            }
            (CType::Named(param), ArgType::Named(given)) => same_name(param, given),
            (CType::PtxPointer { .. }, ArgType::Pointer { .. }) => true,
            // An address carried as an integer, which the caller says it means.
            (CType::Pointer { .. } | CType::PtxPointer { .. }, ArgType::Reinterpreted(given)) => {
                given.integer_bits() == Some(64)
            }
            (
                CType::Pointer { pointee, is_const },
                ArgType::Pointer {
                    pointee: given,
                    read_only,
                },
            ) => {
                (*is_const || !read_only)
                    && pointee
                        .as_deref()
                        .is_none_or(|pointee| pointee.holds(given))
            }
            _ => false,
        }
    }

    /// Whether a pointer to this type may point at elements of meaning `element`.
    fn holds(&self, element: &ArgType) -> bool {
        match (self, element) {
            (CType::Void, _) | (_, ArgType::Unknown) => true,
            (CType::Scalar(param), ArgType::Scalar(given)) => param.class() == given.class(),
            (CType::Named(param), ArgType::Named(given)) => same_name(param, given),
            _ => false,
        }
    }
}

/// Whether a struct parameter named `param` (qualified, as demangled) is the C type `given`
/// names: the same name, or its last component when `given` is not qualified.
fn same_name(param: &str, given: &str) -> bool {
    param == given
        || (!given.contains("::")
            && param
                .strip_suffix(given)
                .is_some_and(|scope| scope.ends_with("::")))
}

/// What a launch argument means in C, from its Rust type (see
/// [`KernelArg::C_TYPE`](crate::launch::KernelArg::C_TYPE)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ArgType {
    /// A scalar: `i32` is `int`, `f32` is `float`, `half::f16` is `__half`.
    Scalar(Scalar),
    /// An integer whose bits the kernel may read as signed or unsigned of the same width
    /// ([`Reinterpret`](crate::launch::Reinterpret)); the scalar is the Rust type given.
    Reinterpreted(Scalar),
    /// A struct by the C name its derive gives (`#[cudyn(c_name = "Odd")]`).
    Named(&'static str),
    /// A device address: `&DeviceBuffer<T>` and `DeviceSlice<T>` are read-only (`const T*`),
    /// `&mut DeviceBuffer<T>` and `DeviceSliceMut<T>` are not (`T*`).
    Pointer {
        /// What the elements mean.
        pointee: &'static ArgType,
        /// Whether the caller lent the memory for reading only.
        read_only: bool,
    },
    /// A value whose C type cudyn does not know: an array (CUDA's vector types), a struct
    /// derived without a `c_name`, a `Bytemuck` wrapper. Checked by size and offset only.
    Unknown,
}

impl ArgType {
    /// The C type this argument stands for, as a C programmer would write it.
    pub fn c_spelling(&self) -> Cow<'static, str> {
        match self {
            ArgType::Scalar(scalar) | ArgType::Reinterpreted(scalar) => scalar.c_name().into(),
            ArgType::Named(name) => (*name).into(),
            ArgType::Pointer { pointee, read_only } => {
                let constness = if *read_only { "const " } else { "" };
                format!("{constness}{}*", pointee.c_spelling()).into()
            }
            ArgType::Unknown => "a type cudyn does not know".into(),
        }
    }
}

impl fmt::Display for ArgType {
    /// The argument as the Rust caller wrote it, with an article: "an `f32`", "a read-only
    /// buffer of `i32` (`const int*`)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgType::Scalar(scalar) => {
                let name = scalar.rust_name();
                let article = if name.starts_with(['i', 'f']) {
                    "an"
                } else {
                    "a"
                };
                write!(f, "{article} `{name}`")
            }
            ArgType::Reinterpreted(scalar) => {
                write!(f, "a `Reinterpret<{}>`", scalar.rust_name())
            }
            ArgType::Named(name) => write!(f, "a struct `{name}`"),
            ArgType::Pointer { pointee, read_only } => {
                let lent = if *read_only { "read-only" } else { "mutable" };
                let element = match pointee {
                    ArgType::Scalar(scalar) | ArgType::Reinterpreted(scalar) => scalar.rust_name(),
                    ArgType::Named(name) => name,
                    _ => "elements of a type cudyn does not know",
                };
                write!(
                    f,
                    "a {lent} buffer of `{element}` (`{}`)",
                    self.c_spelling()
                )
            }
            ArgType::Unknown => f.write_str("a value of a type cudyn does not know"),
        }
    }
}

/// The parameter types of a C++ kernel read from its mangled `symbol` (through its demangled
/// signature, so that the demangler resolves substitutions and template parameters); `None`
/// for an `extern "C"` kernel or a symbol that does not demangle. An entry is `None` where the
/// type is one the check does not model.
pub fn param_types_of_symbol(symbol: &str) -> Option<Vec<Option<CType>>> {
    let signature = cpp_names(symbol)?.signature;
    let list = parameter_list(&signature)?;
    if list.trim().is_empty() || list.trim() == "void" {
        return Some(Vec::new());
    }
    Some(split_top_level(list).map(CType::from_cpp).collect())
}

/// The text between the parentheses that close `signature`: its parameter list.
fn parameter_list(signature: &str) -> Option<&str> {
    let body = signature.strip_suffix(')')?;
    let mut depth = 0usize;
    for (index, byte) in body.bytes().enumerate().rev() {
        match byte {
            b')' => depth += 1,
            b'(' if depth == 0 => return Some(&body[index + 1..]),
            b'(' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `list` split at the commas outside any brackets.
fn split_top_level(list: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0i32;
    let mut start = 0;
    let mut pieces = Vec::new();
    for (index, byte) in list.bytes().enumerate() {
        match byte {
            b'<' | b'(' | b'[' => depth += 1,
            b'>' | b')' | b']' => depth -= 1,
            b',' if depth == 0 => {
                pieces.push(&list[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    pieces.push(&list[start..]);
    pieces.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled(cpp: &str) -> Option<String> {
        CType::from_cpp(cpp).map(|ty| ty.to_string())
    }

    #[test]
    fn cpp_spellings_read_as_c_types_and_the_rest_as_unknown() {
        assert_eq!(spelled("float const*").as_deref(), Some("const float*"));
        assert_eq!(spelled("const float*").as_deref(), Some("const float*"));
        assert_eq!(spelled("float* const*").as_deref(), Some("float* const*"));
        assert_eq!(spelled("void*").as_deref(), Some("void*"));
        assert_eq!(spelled("unsigned long").as_deref(), Some("unsigned long"));
        assert_eq!(
            spelled("ns::Vec<float, 3>").as_deref(),
            Some("ns::Vec<float, 3>")
        );
        assert_eq!(spelled("float&"), None);
        assert_eq!(spelled("float (*)(int)"), None);
        assert_eq!(spelled("float [3]"), None);
        assert_eq!(spelled("decltype (nullptr)"), None);
    }

    #[test]
    fn a_parameter_list_splits_at_top_level_commas_only() {
        // f(ns::Pair<int, float>, float (*)(int, int), int): the demangler's signature.
        let list = parameter_list("f(ns::Pair<int, float>, float (*)(int, int), int)").unwrap();
        let pieces: Vec<&str> = split_top_level(list).map(str::trim).collect();
        assert_eq!(
            pieces,
            ["ns::Pair<int, float>", "float (*)(int, int)", "int"]
        );
        assert_eq!(parameter_list("f()"), Some(""));
        assert_eq!(parameter_list("f"), None);
    }

    #[test]
    fn what_each_parameter_type_accepts() {
        let int = CType::Scalar(Scalar::Int);
        assert!(int.accepts(&ArgType::Scalar(Scalar::Int)));
        assert!(!int.accepts(&ArgType::Scalar(Scalar::UnsignedInt)));
        assert!(int.accepts(&ArgType::Reinterpreted(Scalar::UnsignedInt)));
        assert!(!int.accepts(&ArgType::Reinterpreted(Scalar::UnsignedLongLong)));
        assert!(!int.accepts(&ArgType::Scalar(Scalar::Float)));
        assert!(int.accepts(&ArgType::Unknown));
        // `long` and `long long` are one argument; so are `char` and `signed char`.
        assert!(CType::Scalar(Scalar::Long).accepts(&ArgType::Scalar(Scalar::LongLong)));
        assert!(CType::Scalar(Scalar::Char).accepts(&ArgType::Scalar(Scalar::SignedChar)));
        let floats = |read_only| ArgType::Pointer {
            pointee: &ArgType::Scalar(Scalar::Float),
            read_only,
        };
        let writable = CType::from_cpp("float*").unwrap();
        assert!(writable.accepts(&floats(false)));
        assert!(!writable.accepts(&floats(true)));
        assert!(!writable.accepts(&ArgType::Scalar(Scalar::UnsignedLongLong)));
        assert!(writable.accepts(&ArgType::Reinterpreted(Scalar::UnsignedLongLong)));
        let read = CType::from_cpp("float const*").unwrap();
        assert!(read.accepts(&floats(true)) && read.accepts(&floats(false)));
        assert!(CType::from_cpp("void const*")
            .unwrap()
            .accepts(&floats(true)));
        let named = CType::Named("geo::Point".to_owned());
        assert!(named.accepts(&ArgType::Named("Point")));
        assert!(named.accepts(&ArgType::Named("geo::Point")));
        assert!(!named.accepts(&ArgType::Named("oint")));
        assert!(!named.accepts(&ArgType::Named("other::Point")));
    }
}
