//! [`DeviceRepr`]: what may be copied to the device and passed to a kernel by value, and the
//! types that are: numbers, arrays, derived structs, and with features, `half`'s types and
//! `bytemuck`'s `Pod` types through [`Bytemuck`].

use crate::ctype::{ArgType, Scalar};

/// Plain data that may be copied byte for byte between host and device and passed to a kernel by
/// value.
///
/// cudyn implements it for the integer and floating-point types and for arrays of `DeviceRepr`
/// types; with the `half` feature, for `half::f16` and `half::bf16` (`__half` and
/// `__nv_bfloat16`); with the `bytemuck` feature, for `cudyn::Bytemuck<T>` of any
/// `bytemuck::Pod` type. For a struct, derive it (the `derive` feature, on by default):
///
/// ```
/// # #[cfg(feature = "derive")] {
/// // struct Particle { float3 position; float mass; int id; char kind; char pad[3]; };
/// #[derive(Clone, Copy, cudyn::DeviceRepr)]
/// #[repr(C)]
/// struct Particle {
///     position: [f32; 3],
///     mass: f32,
///     id: i32,
///     kind: u8,
///     _pad: [u8; 3],
/// }
/// # }
/// ```
///
/// The derive checks at compile time what a hand-written `unsafe impl` would have to promise:
/// - The struct is `#[repr(C)]` (`align(N)` and `packed` may be added) or
///   `#[repr(transparent)]`: a Rust-layout struct may reorder its fields. Enums and unions are
///   refused (not every bit pattern is a variant; a union's bytes beyond its active field are
///   uninitialized), and so are structs without fields (size 0 in Rust, 1 in C++).
/// - Every field is `DeviceRepr`, so a `bool`, a `char`, a reference or a `Vec` is refused.
/// - **No padding.** A value is copied byte for byte, padding included, and padding bytes are
///   uninitialized: copying them would hand the device whatever the host had in that memory,
///   and would make reading a value's bytes undefined behaviour. So the derive refuses a struct
///   with padding and says where and how much, and the fix is a field of its own:
///   `_pad: [u8; N]`, which a value then holds as zeros (or anything) like any other field.
///   This also makes the Rust struct show every byte of the C struct it stands for.
/// - No generic parameters: whether `Pair<T>` has padding depends on `T`, which the derive
///   cannot check. Derive it on one struct per instance.
///
/// Where cudyn is not the crate `::cudyn` (renamed, or re-exported by another crate), say where
/// it is: `#[cudyn(crate = "path::to::cudyn")]`.
///
/// Alignment matters for kernel parameters: a launch checks each argument's size and its offset
/// in the C layout of the argument list against the kernel's, and an argument less aligned than
/// its parameter can land at another offset. Match the device type's alignment:
///
/// ```
/// # #[cfg(feature = "derive")] {
/// // float4 is 16-byte aligned; [f32; 4] is 4-byte aligned.
/// #[derive(Clone, Copy, cudyn::DeviceRepr)]
/// #[repr(C, align(16))]
/// struct Float4([f32; 4]);
/// # }
/// ```
///
/// # Safety
/// Implement it by hand only for types that are `#[repr(C)]` (or `#[repr(transparent)]` over
/// such a type) whose layout matches the device type they stand for, that hold no host pointers
/// or references, that have no padding bytes, and for which every bit pattern is a valid value
/// (the device may write any bytes). The derive checks all of this but the match with the device
/// type, which every launch leaves to its caller (see [`crate::launch`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not `DeviceRepr`: it cannot be copied to the device or passed to a \
               kernel by value",
    label = "not `DeviceRepr`",
    note = "numbers, arrays of them, and #[repr(C)] structs of them with \
            #[derive(cudyn::DeviceRepr)] are; `bool`, `char`, references, pointers and \
            Rust-layout types are not"
)]
pub unsafe trait DeviceRepr: Copy + 'static {
    /// What a value means in C, which a launch checks against a parameter's C type where the
    /// kernel's types are known: `int` for `i32`, the `c_name` of a derived struct
    /// (`#[cudyn(c_name = "Odd")]`). [`ArgType::Unknown`], the default, is checked by size only.
    const C_TYPE: ArgType = ArgType::Unknown;
}

#[cfg(feature = "derive")]
pub use cudyn_derive::DeviceRepr;

macro_rules! device_repr {
    ($($ty:ty => $scalar:ident),*) => { $(
        // SAFETY: a primitive number (or a transparent wrapper of `u16`, for `half`'s types):
        // fixed layout, no padding, any bit pattern valid.
        unsafe impl DeviceRepr for $ty {
            const C_TYPE: ArgType = ArgType::Scalar(Scalar::$scalar);
        }
    )* };
}
device_repr!(
    u8 => UnsignedChar, u16 => UnsignedShort, u32 => UnsignedInt, u64 => UnsignedLongLong,
    i8 => SignedChar, i16 => Short, i32 => Int, i64 => LongLong, f32 => Float, f64 => Double
);
#[cfg(target_pointer_width = "64")]
device_repr!(usize => UnsignedLong, isize => Long);
#[cfg(not(target_pointer_width = "64"))]
device_repr!(usize => UnsignedInt, isize => Int);
#[cfg(feature = "half")]
device_repr!(half::f16 => Half, half::bf16 => BFloat16);

// SAFETY: an array of plain data is plain data with the C array layout, and has no padding
// since its elements have none and each element's size is a multiple of its alignment.
unsafe impl<T: DeviceRepr, const N: usize> DeviceRepr for [T; N] {}

/// Any [`bytemuck::Pod`] type as a [`DeviceRepr`]: `Bytemuck(value)` as a kernel argument,
/// `DeviceBuffer<Bytemuck<T>>` as a buffer, `Global<Bytemuck<T>>` as a variable (the `bytemuck`
/// feature).
///
/// `Pod` promises what `DeviceRepr` needs (no padding, every bit pattern valid, `Copy +
/// 'static`), but a blanket `impl<T: Pod> DeviceRepr for T` would conflict with cudyn's own
/// impls and with every user's, so the promise crosses over through this
/// `#[repr(transparent)]` wrapper, which has `T`'s exact layout. For a struct of your own, derive
/// [`DeviceRepr`] next to `Pod` instead; the wrapper is for `Pod` types of other crates. Slices
/// and vectors convert without copying through [`bytemuck::TransparentWrapper`]:
///
/// ```
/// use bytemuck::TransparentWrapper;
/// use cudyn::Bytemuck;
///
/// let points: Vec<[f32; 2]> = vec![[1.0, 2.0], [3.0, 4.0]];
/// let wrapped: &[Bytemuck<[f32; 2]>] = Bytemuck::wrap_slice(&points);
/// // DeviceBuffer::from_slice(wrapped), then Bytemuck::peel_vec(buffer.to_vec()?) back.
/// assert_eq!(Bytemuck::peel_slice(wrapped), &points[..]);
/// ```
#[cfg(feature = "bytemuck")]
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(transparent)]
pub struct Bytemuck<T: bytemuck::Pod>(pub T);

// SAFETY: a transparent wrapper of a Pod type: Pod's contract (repr(C) or transparent, no
// padding, every bit pattern valid, no interior mutability) is DeviceRepr's.
#[cfg(feature = "bytemuck")]
unsafe impl<T: bytemuck::Pod> DeviceRepr for Bytemuck<T> {}

// SAFETY: `Bytemuck<T>` is #[repr(transparent)] over its only field, a `T`.
#[cfg(feature = "bytemuck")]
unsafe impl<T: bytemuck::Pod> bytemuck::TransparentWrapper<T> for Bytemuck<T> {}

/// What `#[derive(DeviceRepr)]` expands to calls; not part of the API.
#[doc(hidden)]
pub mod derive_support {
    use super::DeviceRepr;

    /// Writes `field`'s bytes at `offset` of `bytes` (see `Pack`).
    pub fn write_field<F: DeviceRepr>(field: &F, bytes: &mut [u8], offset: usize) {
        crate::memory::pack::write_field(field, bytes, offset);
    }

    /// Compiles only when `T` is `DeviceRepr`: the derive calls it for each field's type.
    pub const fn assert_device_repr<T: DeviceRepr>() {}

    /// Panics (a compile error, as the derive evaluates it in a constant) when `field` does not
    /// start at `end_of_previous`, where the field before it ends (0 for the first): padding.
    #[track_caller]
    pub const fn assert_field_follows(
        type_name: &str,
        field: &str,
        end_of_previous: usize,
        offset: usize,
    ) {
        if offset != end_of_previous {
            let message = Message::new()
                .gap(type_name, end_of_previous, offset)
                .text(" before field `")
                .text(field)
                .text("`")
                .fix(offset - end_of_previous)
                .text(" before `")
                .text(field)
                .text("`");
            panic!("{}", message.as_str());
        }
    }

    /// Panics (a compile error) when a struct of `size` bytes ends after its last field,
    /// `last_field`, which ends at `end`: padding to round its size up to its alignment.
    #[track_caller]
    pub const fn assert_no_tail_padding(
        type_name: &str,
        last_field: &str,
        end: usize,
        size: usize,
    ) {
        if size != end {
            let message = Message::new()
                .gap(type_name, end, size)
                .text(" after its last field `")
                .text(last_field)
                .text("`, to round its size up to its alignment")
                .fix(size - end)
                .text(" after `")
                .text(last_field)
                .text("`");
            panic!("{}", message.as_str());
        }
    }

    /// A compile-time error message, built in a fixed buffer (a constant cannot allocate or
    /// format); text past its capacity is cut.
    struct Message {
        bytes: [u8; 512],
        len: usize,
    }

    impl Message {
        const fn new() -> Self {
            Message {
                bytes: [0; 512],
                len: 0,
            }
        }

        /// "`Name` has N bytes of padding (bytes A..B)"
        const fn gap(self, type_name: &str, start: usize, end: usize) -> Self {
            self.text("`")
                .text(type_name)
                .text("` has ")
                .number(end - start)
                .text(if end - start == 1 { " byte" } else { " bytes" })
                .text(" of padding (bytes ")
                .number(start)
                .text("..")
                .number(end)
                .text(")")
        }

        /// Why padding is refused and the field that replaces it.
        const fn fix(self, bytes: usize) -> Self {
            self.text(
                ": DeviceRepr values are copied byte for byte and padding bytes are \
                 uninitialized, so declare them as a `[u8; ",
            )
            .number(bytes)
            .text("]` field (such as `_pad: [u8; ")
            .number(bytes)
            .text("]`)")
        }

        const fn text(mut self, text: &str) -> Self {
            let text = text.as_bytes();
            let mut index = 0;
            while index < text.len() && self.len < self.bytes.len() {
                self.bytes[self.len] = text[index];
                self.len += 1;
                index += 1;
            }
            self
        }

        const fn number(self, value: usize) -> Self {
            let digits = crate::digits::Decimal::of(value as u64);
            self.text(digits.as_str())
        }

        /// The text, cut back to the last whole character if the buffer filled mid-character.
        const fn as_str(&self) -> &str {
            let mut len = self.len;
            loop {
                match core::str::from_utf8(self.bytes.split_at(len).0) {
                    Ok(text) => return text,
                    Err(_) => len -= 1,
                }
            }
        }
    }
}
