//! Types for C callers: what a launch argument is (`cudyn_arg_type`, which `cudyn_launch_ex`
//! checks), and a kernel parameter's C type where the device code says it.

use std::ffi::c_char;

use cudyn::{ArgType, Scalar};

use crate::handles::entry_returning;
use crate::info::give_string;
use crate::kernel::{cudyn_kernel, KERNELS};
use crate::status::{cudyn_status, Failure};

/// `cudyn_arg_type.scalar`: a type cudyn is not told; the argument is checked by size only.
pub const CUDYN_TYPE_UNKNOWN: u32 = 0;
/// `cudyn_arg_type.scalar`: `signed char` (`int8_t`).
pub const CUDYN_TYPE_INT8: u32 = 1;
/// `cudyn_arg_type.scalar`: `unsigned char` (`uint8_t`).
pub const CUDYN_TYPE_UINT8: u32 = 2;
/// `cudyn_arg_type.scalar`: `short` (`int16_t`).
pub const CUDYN_TYPE_INT16: u32 = 3;
/// `cudyn_arg_type.scalar`: `unsigned short` (`uint16_t`).
pub const CUDYN_TYPE_UINT16: u32 = 4;
/// `cudyn_arg_type.scalar`: `int` (`int32_t`).
pub const CUDYN_TYPE_INT32: u32 = 5;
/// `cudyn_arg_type.scalar`: `unsigned int` (`uint32_t`).
pub const CUDYN_TYPE_UINT32: u32 = 6;
/// `cudyn_arg_type.scalar`: `long long` or `long` (`int64_t`).
pub const CUDYN_TYPE_INT64: u32 = 7;
/// `cudyn_arg_type.scalar`: `unsigned long long`, `unsigned long` or `size_t` (`uint64_t`).
pub const CUDYN_TYPE_UINT64: u32 = 8;
/// `cudyn_arg_type.scalar`: `float`.
pub const CUDYN_TYPE_FLOAT: u32 = 9;
/// `cudyn_arg_type.scalar`: `double`.
pub const CUDYN_TYPE_DOUBLE: u32 = 10;
/// `cudyn_arg_type.scalar`: `__half`.
pub const CUDYN_TYPE_HALF: u32 = 11;
/// `cudyn_arg_type.scalar`: `__nv_bfloat16`.
pub const CUDYN_TYPE_BFLOAT16: u32 = 12;

/// `cudyn_arg_type.indirection`: the value itself.
pub const CUDYN_VALUE: u32 = 0;
/// `cudyn_arg_type.indirection`: a device address of memory the kernel only reads (`const T*`).
pub const CUDYN_CONST_POINTER: u32 = 1;
/// `cudyn_arg_type.indirection`: a device address of memory the kernel may write (`T*`).
pub const CUDYN_POINTER: u32 = 2;

/// What a launch argument is: a scalar (`CUDYN_TYPE_*`) by value, or a pointer to such scalars,
/// read-only or not. `{CUDYN_TYPE_FLOAT, CUDYN_CONST_POINTER}` is a `const float*`;
/// `{CUDYN_TYPE_UNKNOWN, CUDYN_POINTER}` a pointer to anything the kernel may write.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct cudyn_arg_type {
    /// A `CUDYN_TYPE_*`: the value's type, or the pointee's.
    pub scalar: u32,
    /// `CUDYN_VALUE`, `CUDYN_CONST_POINTER` or `CUDYN_POINTER`.
    pub indirection: u32,
}

/// The meaning of each type, by the table of `CUDYN_TYPE_*` codes and their scalars.
macro_rules! meanings {
    ($($code:ident => $scalar:ident),*) => {
        fn meaning(ty: cudyn_arg_type) -> Option<&'static ArgType> {
            Some(match (ty.scalar, ty.indirection) {
                (CUDYN_TYPE_UNKNOWN, CUDYN_VALUE) => &ArgType::Unknown,
                (CUDYN_TYPE_UNKNOWN, CUDYN_CONST_POINTER) => &ArgType::Pointer {
                    pointee: &ArgType::Unknown,
                    read_only: true,
                },
                (CUDYN_TYPE_UNKNOWN, CUDYN_POINTER) => &ArgType::Pointer {
                    pointee: &ArgType::Unknown,
                    read_only: false,
                },
                $(
                    ($code, CUDYN_VALUE) => &ArgType::Scalar(Scalar::$scalar),
                    ($code, CUDYN_CONST_POINTER) => &ArgType::Pointer {
                        pointee: &ArgType::Scalar(Scalar::$scalar),
                        read_only: true,
                    },
                    ($code, CUDYN_POINTER) => &ArgType::Pointer {
                        pointee: &ArgType::Scalar(Scalar::$scalar),
                        read_only: false,
                    },
                )*
                _ => return None,
            })
        }
    };
}
meanings!(
    CUDYN_TYPE_INT8 => SignedChar, CUDYN_TYPE_UINT8 => UnsignedChar, CUDYN_TYPE_INT16 => Short,
    CUDYN_TYPE_UINT16 => UnsignedShort, CUDYN_TYPE_INT32 => Int, CUDYN_TYPE_UINT32 => UnsignedInt,
    CUDYN_TYPE_INT64 => LongLong, CUDYN_TYPE_UINT64 => UnsignedLongLong, CUDYN_TYPE_FLOAT => Float,
    CUDYN_TYPE_DOUBLE => Double, CUDYN_TYPE_HALF => Half, CUDYN_TYPE_BFLOAT16 => BFloat16
);

/// What each of `given` means; a code that is not one of the constants is refused, naming the
/// argument.
pub(crate) fn arg_types(given: &[cudyn_arg_type]) -> Result<Vec<&'static ArgType>, Failure> {
    given
        .iter()
        .enumerate()
        .map(|(index, &ty)| {
            meaning(ty).ok_or_else(|| {
                Failure::invalid_argument(format!(
                    "`arg_types[{index}]` is {{{}, {}}}: the scalar must be a CUDYN_TYPE_* \
                     constant and the indirection CUDYN_VALUE, CUDYN_CONST_POINTER or \
                     CUDYN_POINTER",
                    ty.scalar, ty.indirection
                ))
            })
        })
        .collect()
}

/// The C type of parameter `index` (from 0) of the kernel, as its device code says it: on
/// success `*spelling` is a new string (`"const float*"`, `"int"`, `"32-bit integer"` from
/// PTX), freed with `cudyn_string_free`, or null when only the parameter's size is known (an
/// `extern "C"` kernel from a cubin), which launches check by size only. An index past the last
/// parameter is `CUDYN_ERROR_INVALID_ARGUMENT`.
///
/// # Safety
/// `spelling` is valid for writing a pointer (null is refused).
#[no_mangle]
pub unsafe extern "C" fn cudyn_kernel_param_type(
    kernel: *const cudyn_kernel,
    index: usize,
    spelling: *mut *mut c_char,
) -> cudyn_status {
    let compute = || {
        let kernel = KERNELS.get(kernel)?;
        let types = kernel.param_types()?;
        let ty = types.get(index).ok_or_else(|| {
            Failure::invalid_argument(format!(
                "parameter {index} does not exist: the kernel takes {} parameters",
                types.len()
            ))
        })?;
        Ok(ty
            .as_ref()
            .map_or(std::ptr::null_mut(), |ty| give_string(&ty.to_string())))
    };
    // SAFETY: the caller vouches that `spelling` is null or writable.
    unsafe { entry_returning(spelling, "spelling", compute) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_means_its_c_type_and_others_are_refused() {
        let spelled = |scalar, indirection| {
            meaning(cudyn_arg_type {
                scalar,
                indirection,
            })
            .map(|ty| ty.c_spelling().into_owned())
        };
        assert_eq!(
            spelled(CUDYN_TYPE_INT32, CUDYN_VALUE).as_deref(),
            Some("int")
        );
        assert_eq!(
            spelled(CUDYN_TYPE_FLOAT, CUDYN_CONST_POINTER).as_deref(),
            Some("const float*")
        );
        assert_eq!(
            spelled(CUDYN_TYPE_HALF, CUDYN_POINTER).as_deref(),
            Some("__half*")
        );
        assert_eq!(
            spelled(CUDYN_TYPE_UINT64, CUDYN_VALUE).as_deref(),
            Some("unsigned long long")
        );
        assert_eq!(spelled(13, CUDYN_VALUE), None);
        assert_eq!(spelled(CUDYN_TYPE_INT32, 3), None);
        let refused = arg_types(&[
            cudyn_arg_type {
                scalar: CUDYN_TYPE_INT32,
                indirection: CUDYN_VALUE,
            },
            cudyn_arg_type {
                scalar: 99,
                indirection: CUDYN_VALUE,
            },
        ])
        .unwrap_err();
        let message = format!("{refused:?}");
        assert!(message.contains("`arg_types[1]` is {99, 0}"), "{message}");
    }
}
