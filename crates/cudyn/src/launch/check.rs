//! The argument check: launch arguments against a kernel's parameters, both as
//! [`ParamLayout`]s and, where the kernel's types are known, as C types, naming the first
//! difference ([`ArgumentMismatch`]).

use crate::ctype::{ArgType, CType};
pub use crate::mismatch::ArgumentMismatch;
use crate::param::ParamLayout;

/// Checks launch arguments against a kernel's parameters: the count, then the size and offset of
/// each parameter in order. The arguments' layouts are their C layout (see
/// [`ParamLayout::c_layout`]), so an argument whose alignment differs from its parameter's shows
/// as an offset mismatch.
///
/// Arrays stand for CUDA's vector types by size and offset: a `[f32; 3]` for a `float3` or an
/// `[i32; 3]` for an `int3` always matches (both are 4-byte aligned), and a `[f32; 4]` for a
/// `float4` matches where the arguments before it put it at the `float4`'s offset (first, or
/// after a multiple of 16 bytes). Elsewhere it is refused as an offset mismatch, although the
/// driver would copy its 16 bytes to the right place: the check sees layouts, not device types,
/// and an alignment that differs from the parameter's is the one sign of a wrong type that the
/// layout gives beyond its size, so it is not waived for arrays. The fix it names is a type of
/// the parameter's alignment, `#[derive(DeviceRepr)] #[repr(C, align(16))] struct
/// Float4([f32; 4])`.
///
/// Pure and allocation-free, so it runs on every launch: when everything matches it is one
/// pass over the two lists' words.
#[inline]
pub fn check_arguments(
    params: &[ParamLayout],
    args: &[ParamLayout],
) -> Result<(), ArgumentMismatch> {
    let (params_words, args_words) = (as_words(params), as_words(args));
    // Every word compared, without an early exit (one predictable branch for the whole list)
    // and without a call to `memcmp`: glibc's vectorized forms touch even an empty slice's
    // dangling address with masked loads, which cost 120 ns instead of 2 on a Xeon (a fault
    // suppressed by microcode), and a kernel without parameters has an empty layout.
    let same = params_words.len() == args_words.len()
        && params_words
            .iter()
            .zip(args_words)
            .fold(0, |differences, (param, arg)| differences | (param ^ arg))
            == 0;
    if same {
        return Ok(());
    }
    first_difference(params, args).map_or(Ok(()), Err)
}

/// Checks what launch arguments mean against the kernel's parameter types: the first argument
/// a parameter of known type does not accept (see [`CType::accepts`]) is an
/// [`ArgumentMismatch::Type`] naming both. A parameter of unknown type (`None`: an `extern "C"`
/// kernel known from a cubin alone) and an argument of unknown meaning are checked by size
/// only, in [`check_arguments`]. The two lists have the same length once that check passed;
/// extra entries of either are not looked at.
pub fn check_types(
    params: &[Option<CType>],
    args: &[&'static ArgType],
) -> Result<(), ArgumentMismatch> {
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        if let Some(param) = param {
            if !param.accepts(arg) {
                return Err(type_mismatch(index, param, arg));
            }
        }
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn type_mismatch(index: usize, param: &CType, arg: &ArgType) -> ArgumentMismatch {
    ArgumentMismatch::Type {
        index,
        expected: param.clone(),
        given: *arg,
    }
}

// A `ParamLayout` is two words and nothing else: no padding, every byte initialized.
const _: () = assert!(
    std::mem::size_of::<ParamLayout>() == 2 * std::mem::size_of::<usize>()
        && std::mem::align_of::<ParamLayout>() == std::mem::align_of::<usize>()
);

/// The layouts as the words they consist of (two per layout, in the same order in every
/// layout): two lists of layouts are equal exactly when their words are, and words compare
/// several at a time (vectorized), where layouts compare field by field.
#[inline]
fn as_words(layouts: &[ParamLayout]) -> &[usize] {
    // SAFETY: a ParamLayout is exactly two initialized usize fields (asserted above), so `len`
    // layouts are `2 * len` initialized words, aligned as usize, borrowed as long as `layouts`.
    unsafe { std::slice::from_raw_parts(layouts.as_ptr().cast::<usize>(), 2 * layouts.len()) }
}

/// The first difference between two layouts, in the order [`check_arguments`] names them.
#[cold]
#[inline(never)]
fn first_difference(params: &[ParamLayout], args: &[ParamLayout]) -> Option<ArgumentMismatch> {
    if params.len() != args.len() {
        return Some(ArgumentMismatch::Count {
            expected: params.len(),
            given: args.len(),
        });
    }
    params
        .iter()
        .zip(args)
        .enumerate()
        .find_map(|(index, (param, arg))| {
            if param.size != arg.size {
                Some(ArgumentMismatch::Size {
                    index,
                    expected: param.size,
                    given: arg.size,
                })
            } else {
                (param.offset != arg.offset).then_some(ArgumentMismatch::Offset {
                    index,
                    expected: param.offset,
                    given: arg.offset,
                })
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::KernelArgs;
    use crate::memory::{DeviceBuffer, DeviceRepr};

    /// The layout of `extern "C" __global__ void k(float a, const float* x, float* y, int n)`.
    const SAXPY: [ParamLayout; 4] = [
        ParamLayout { offset: 0, size: 4 },
        ParamLayout { offset: 8, size: 8 },
        ParamLayout {
            offset: 16,
            size: 8,
        },
        ParamLayout {
            offset: 24,
            size: 4,
        },
    ];

    /// `check_arguments` of `args`' layouts against `params`.
    fn check(params: &[ParamLayout], args: impl KernelArgs) -> Result<(), ArgumentMismatch> {
        check_arguments(params, args.layouts())
    }

    #[test]
    fn matching_arguments_pass() {
        let x = DeviceBuffer::<f32>::alloc(0).unwrap();
        let mut y = DeviceBuffer::<f32>::alloc(0).unwrap();
        assert_eq!(check(&SAXPY, (1.0f32, &x, &mut y, 3i32)), Ok(()));
        assert_eq!(check(&[], ()), Ok(()));
    }

    #[test]
    fn a_wrong_count_names_both_counts() {
        let x = DeviceBuffer::<f32>::alloc(0).unwrap();
        let mismatch = check(&SAXPY, (1.0f32, &x, &x)).unwrap_err();
        assert_eq!(
            mismatch,
            ArgumentMismatch::Count {
                expected: 4,
                given: 3
            }
        );
        assert_eq!(
            mismatch.to_string(),
            "the kernel takes 4 parameters but 3 arguments were given"
        );
    }

    #[test]
    fn a_wrong_size_names_the_parameter_and_both_sizes() {
        let x = DeviceBuffer::<f32>::alloc(0).unwrap();
        // f64 where the kernel takes a float.
        let mismatch = check(&SAXPY, (1.0f64, &x, &x, 3i32)).unwrap_err();
        assert_eq!(
            mismatch,
            ArgumentMismatch::Size {
                index: 0,
                expected: 4,
                given: 8
            }
        );
        assert!(mismatch.to_string().contains("parameter 0 is 4 bytes"));
        // usize where the kernel takes an int.
        assert_eq!(
            check(&SAXPY, (1.0f32, &x, &x, 3usize)),
            Err(ArgumentMismatch::Size {
                index: 3,
                expected: 4,
                given: 8
            })
        );
    }

    #[test]
    fn a_misaligned_argument_of_the_right_size_is_caught_by_its_offset() {
        // void k(int n, float4 v): float4 is 16-byte aligned, so it lies at offset 16.
        let params = [
            ParamLayout { offset: 0, size: 4 },
            ParamLayout {
                offset: 16,
                size: 16,
            },
        ];
        let mismatch = check(&params, (1i32, [1.0f32; 4])).unwrap_err();
        assert_eq!(
            mismatch,
            ArgumentMismatch::Offset {
                index: 1,
                expected: 16,
                given: 4
            }
        );
        assert!(mismatch.to_string().contains("byte offset 16"));
        #[repr(C, align(16))]
        #[derive(Clone, Copy)]
        struct Float4([f32; 4]);
        // SAFETY: repr(C), four floats, any bit pattern valid.
        unsafe impl DeviceRepr for Float4 {}
        assert_eq!(check(&params, (1i32, Float4([1.0; 4]))), Ok(()));
    }

    #[test]
    fn the_first_difference_is_named_when_several_differ() {
        // Parameters 1, 2 and 3 all differ (a u32 where a pointer goes shifts the rest): the
        // first is the one to fix.
        assert_eq!(
            check(&SAXPY, (1.0f32, 2u32, 3u64, 4u64)),
            Err(ArgumentMismatch::Size {
                index: 1,
                expected: 8,
                given: 4
            })
        );
    }
}
