//! Launch arguments: one argument ([`KernelArg`]) and a whole argument list ([`KernelArgs`]),
//! either a tuple of up to 32 arguments or an [`ArgList`] of any length (see [`args!`]).
//!
//! Both describe themselves as [`ParamLayout`]s, the C layout of their values, and as
//! [`ArgType`]s, what their values mean in C, so that a launch compares them with the kernel's
//! parameters as one slice against another. A tuple's description is computed at compile time;
//! an `ArgList` computes each argument's offset as it is pushed. Neither allocates up to
//! [`INLINE_ARGS`] arguments.
//!
//! [`args!`]: crate::args

use std::alloc::Layout;
use std::ffi::c_void;
use std::marker::PhantomData;

use crate::ctype::ArgType;
use crate::memory::{DeviceBuffer, DeviceRepr, DeviceSlice, DeviceSliceMut};
use crate::param::ParamLayout;
use crate::sys::driver::CUdeviceptr;

/// One kernel argument.
///
/// Implemented for every [`DeviceRepr`] type (passed by value: numbers, arrays for CUDA's vector
/// types, derived structs; see [`check_arguments`](crate::launch::check_arguments) for how an
/// array meets a vector parameter's alignment), for `&DeviceBuffer<T>` and
/// `&mut DeviceBuffer<T>` and for views (passed as the device address, a `const T*` for a
/// shared borrow and a `T*` for a mutable one), and for [`Reinterpret`].
///
/// # Safety
/// [`KernelArg::param`] points to [`KernelArg::LAYOUT`]`.size()` readable bytes holding the value
/// the kernel receives, valid as long as `self` is borrowed.
pub unsafe trait KernelArg {
    /// Size and alignment of the value the kernel receives.
    const LAYOUT: Layout;
    /// What the value means in C, checked against the parameter's C type where it is known.
    const C_TYPE: ArgType;
    /// Where the value the kernel receives lies.
    fn param(&self) -> *mut c_void;
}

// SAFETY: the value itself is what the kernel receives.
unsafe impl<T: DeviceRepr> KernelArg for T {
    const LAYOUT: Layout = Layout::new::<T>();
    const C_TYPE: ArgType = T::C_TYPE;
    fn param(&self) -> *mut c_void {
        (self as *const T).cast_mut().cast()
    }
}

macro_rules! pointer_arg {
    ($($ty:ty => $read_only:literal),*) => { $(
        // SAFETY: the kernel receives the device address, which is the `ptr` field.
        unsafe impl<T: DeviceRepr> KernelArg for $ty {
            const LAYOUT: Layout = Layout::new::<CUdeviceptr>();
            const C_TYPE: ArgType = ArgType::Pointer { pointee: &T::C_TYPE, read_only: $read_only };
            fn param(&self) -> *mut c_void {
                (&self.ptr as *const CUdeviceptr).cast_mut().cast()
            }
        }
    )* };
}
pointer_arg!(
    &DeviceBuffer<T> => true,
    &mut DeviceBuffer<T> => false,
    DeviceSlice<'_, T> => true,
    DeviceSliceMut<'_, T> => false
);

/// An integer the kernel reads as the other signedness of the same width, or a 64-bit integer
/// it reads as a pointer: `Reinterpret(n)` passes a `u32` for an `int` parameter, which a launch
/// refuses otherwise. The value's bits are passed unchanged.
///
/// ```
/// // __global__ void fill(int value, ...): the bit pattern 0xffff_ffff is -1 there.
/// let value = cudyn::Reinterpret(u32::MAX);
/// # let _ = value;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Reinterpret<T>(pub T);

macro_rules! reinterpret_arg {
    ($($ty:ty),*) => { $(
        // SAFETY: a transparent wrapper of an integer, which is what the kernel receives.
        unsafe impl KernelArg for Reinterpret<$ty> {
            const LAYOUT: Layout = Layout::new::<$ty>();
            const C_TYPE: ArgType = match <$ty as DeviceRepr>::C_TYPE {
                ArgType::Scalar(scalar) => ArgType::Reinterpreted(scalar),
                other => other,
            };
            fn param(&self) -> *mut c_void {
                (&self.0 as *const $ty).cast_mut().cast()
            }
        }
    )* };
}
reinterpret_arg!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// The arguments' layouts and meanings, both as lists that live unchanged as long as the
/// program: what a tuple of arguments knows at compile time. Its address identifies it: a
/// kernel remembers the last one found to match its parameters, and a launch with that very
/// description needs no comparison.
#[derive(Debug, PartialEq, Eq)]
pub struct StaticArgs {
    /// [`KernelArgs::layouts`].
    pub layouts: &'static [ParamLayout],
    /// [`KernelArgs::types`].
    pub types: &'static [&'static ArgType],
}

/// The arguments of a launch: a tuple of up to 32 [`KernelArg`]s (`()` for none), an
/// [`ArgList`] of any length, or a reference to either.
///
/// # Safety
/// [`KernelArgs::layouts`] is the C layout of the arguments' values, one entry per argument in
/// order; [`KernelArgs::types`] has one entry per argument too, or none; [`KernelArgs::static_args`],
/// when it is `Some`, holds those two lists; and
/// [`KernelArgs::with_pointers`] hands its closure exactly that many pointers, pointer `i` to
/// `layouts()[i].size` readable bytes holding argument `i`'s value, all valid while the closure
/// runs.
pub unsafe trait KernelArgs {
    /// Where each argument's value lies in the parameter buffer, in order.
    fn layouts(&self) -> &[ParamLayout];
    /// What each argument means in C, in order; or an empty list, when the arguments do not say
    /// (a C argument array): then they are checked by size and offset only.
    fn types(&self) -> &[&'static ArgType];
    /// [`KernelArgs::layouts`] and [`KernelArgs::types`] when they live, unchanged, as long as
    /// the program: a tuple's, computed at compile time. A kernel remembers the last such
    /// description found to match its parameters, and a launch with that very description
    /// needs no comparison. `None` (always compare) unless implemented.
    #[inline]
    fn static_args(&self) -> Option<&'static StaticArgs> {
        None
    }
    /// Calls `launch` with an array of pointers to the arguments' values, as `cuLaunchKernel`
    /// takes them (the driver only reads the array).
    fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R;
}

// SAFETY: forwards both methods to the same arguments.
unsafe impl<A: KernelArgs> KernelArgs for &A {
    fn layouts(&self) -> &[ParamLayout] {
        (**self).layouts()
    }
    fn types(&self) -> &[&'static ArgType] {
        (**self).types()
    }
    #[inline]
    fn static_args(&self) -> Option<&'static StaticArgs> {
        (**self).static_args()
    }
    fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
        (**self).with_pointers(launch)
    }
}

// SAFETY: no layouts and no pointers.
unsafe impl KernelArgs for () {
    fn layouts(&self) -> &[ParamLayout] {
        &[]
    }
    fn types(&self) -> &[&'static ArgType] {
        &[]
    }
    #[inline]
    fn static_args(&self) -> Option<&'static StaticArgs> {
        Some(&StaticArgs {
            layouts: &[],
            types: &[],
        })
    }
    fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
        launch([].as_mut_ptr())
    }
}

/// A tuple's description, a constant of its type.
trait Described {
    fn static_described(&self) -> &'static StaticArgs;
}

/// Implements [`KernelArgs`] for every tuple from one element up to the full list given, by
/// growing the list of elements one at a time.
macro_rules! tuple_args {
    (@impl $($name:ident $index:tt)*) => {
        // SAFETY: the layouts are the C layout of the elements' own layouts and the types their
        // own (one constant, `StaticArgs`, serves every method), and there is one pointer per
        // element, in order, each from the element's `KernelArg::param`.
        unsafe impl<$($name: KernelArg),*> KernelArgs for ($($name,)*) {
            #[inline]
            fn layouts(&self) -> &[ParamLayout] {
                self.static_described().layouts
            }
            #[inline]
            fn types(&self) -> &[&'static ArgType] {
                self.static_described().types
            }
            #[inline]
            fn static_args(&self) -> Option<&'static StaticArgs> {
                Some(self.static_described())
            }
            #[inline]
            fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
                let mut pointers = [$(self.$index.param()),*];
                launch(pointers.as_mut_ptr())
            }
        }

        impl<$($name: KernelArg),*> Described for ($($name,)*) {
            #[inline]
            fn static_described(&self) -> &'static StaticArgs {
                const {
                    &StaticArgs {
                        layouts: &ParamLayout::c_layout([$($name::LAYOUT),*]),
                        types: &[$(&$name::C_TYPE),*],
                    }
                }
            }
        }
    };
    ([$($done:tt)*] $name:ident $index:tt $($rest:tt)*) => {
        tuple_args!(@impl $($done)* $name $index);
        tuple_args!([$($done)* $name $index] $($rest)*);
    };
    ([$($done:tt)*]) => {};
}
tuple_args!([]
    A0 0 A1 1 A2 2 A3 3 A4 4 A5 5 A6 6 A7 7 A8 8 A9 9 A10 10 A11 11 A12 12 A13 13 A14 14 A15 15
    A16 16 A17 17 A18 18 A19 19 A20 20 A21 21 A22 22 A23 23 A24 24 A25 25 A26 26 A27 27 A28 28
    A29 29 A30 30 A31 31
);

/// Arguments an [`ArgList`] holds without allocating.
pub const INLINE_ARGS: usize = 32;

/// An argument list of any length, for kernels with more parameters than a tuple holds or with
/// parameters only known at run time. It borrows its arguments; up to [`INLINE_ARGS`] of them
/// it allocates nothing.
///
/// Build it with [`args!`](crate::args) in the launch expression, collect it from an iterator,
/// or extend and push across statements. It takes what a tuple takes, written once: a number
/// or a struct by reference (`&value`), a buffer as `&buffer` (read-only, a `const T*`) or
/// `&mut buffer` (a `T*`), a view by reference (`&view`):
///
/// ```no_run
/// # fn main() -> cudyn::Result<()> {
/// # let kernel = cudyn::Library::from_file("sum.cubin")?.kernel("sum")?;
/// // extern "C" __global__ void sum(double* out, float v0, float v1, ..., float v198)
/// let mut out = cudyn::DeviceBuffer::<f64>::zeroed(1)?;
/// let values: Vec<f32> = (0..199).map(|v| v as f32).collect();
/// let mut args = cudyn::ArgList::new();
/// args.push(&mut out).extend(&values);
/// // SAFETY: `sum` reads its 199 floats and writes one double to `out`, which stays alive and
/// // untouched by other work until the copy below, ordered after the kernel.
/// unsafe { kernel.launch(&cudyn::LaunchConfig::new(1, 1), &args) }?;
/// let total = out.to_vec()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ArgList<'a> {
    layouts: InlineFirst<ParamLayout>,
    types: InlineFirst<&'static ArgType>,
    pointers: InlineFirst<*mut c_void>,
    _arguments: PhantomData<&'a ()>,
}

/// What an [`ArgList`] takes as one argument: `&value` for a [`KernelArg`] (a number, a struct,
/// a view, `&&buffer` as [`args!`](crate::args) writes it), and `&buffer` and `&mut buffer`
/// for a [`DeviceBuffer`].
///
/// # Safety
/// [`ListArg::describe`] returns the argument's C layout, its meaning, and a pointer to
/// `layout.size()` readable bytes holding the value the kernel receives, valid for `'a`.
pub unsafe trait ListArg<'a> {
    /// The argument's layout, meaning and where its value lies.
    fn describe(self) -> (Layout, &'static ArgType, *mut c_void);
}

// SAFETY: the argument is borrowed for `'a`, and its `KernelArg` impl points at its value.
unsafe impl<'a, A: KernelArg> ListArg<'a> for &'a A {
    #[inline]
    fn describe(self) -> (Layout, &'static ArgType, *mut c_void) {
        (A::LAYOUT, const { &A::C_TYPE }, self.param())
    }
}

macro_rules! list_buffer_arg {
    ($($ty:ty => $as_arg:ty),*) => { $(
        // SAFETY: the buffer is borrowed for `'a`, and the kernel receives its address, its
        // `ptr` field, exactly as for the tuple argument `$as_arg`.
        unsafe impl<'a, T: DeviceRepr> ListArg<'a> for $ty {
            #[inline]
            fn describe(self) -> (Layout, &'static ArgType, *mut c_void) {
                let address = (&self.ptr as *const CUdeviceptr).cast_mut().cast();
                (<$as_arg>::LAYOUT, const { &<$as_arg>::C_TYPE }, address)
            }
        }
    )* };
}
list_buffer_arg!(
    &'a DeviceBuffer<T> => &'a DeviceBuffer<T>,
    &'a mut DeviceBuffer<T> => &'a mut DeviceBuffer<T>
);

impl<'a> ArgList<'a> {
    /// An empty list.
    pub fn new() -> Self {
        ArgList {
            layouts: InlineFirst::new(ParamLayout { offset: 0, size: 0 }),
            types: InlineFirst::new(&ArgType::Unknown),
            pointers: InlineFirst::new(std::ptr::null_mut()),
            _arguments: PhantomData,
        }
    }

    /// Appends `arg`, placed after the previous arguments at its own alignment.
    pub fn push(&mut self, arg: impl ListArg<'a>) -> &mut Self {
        let (layout, ty, pointer) = arg.describe();
        self.push_described(layout, ty, pointer)
    }

    /// Appends `arg` with its C meaning unstated: its size and offset are checked, its type
    /// is not, whatever the kernel's parameter types are. For arguments whose Rust type is not
    /// what they mean, such as the raw bits and byte buffers of a command line that knows the
    /// types only as text.
    pub fn push_sized(&mut self, arg: impl ListArg<'a>) -> &mut Self {
        let (layout, _, pointer) = arg.describe();
        self.push_described(layout, &ArgType::Unknown, pointer)
    }

    fn push_described(
        &mut self,
        layout: Layout,
        ty: &'static ArgType,
        pointer: *mut c_void,
    ) -> &mut Self {
        let end = self.layouts.as_slice().last().map_or(0, ParamLayout::end);
        self.layouts.push(ParamLayout::following(end, layout));
        self.types.push(ty);
        self.pointers.push(pointer);
        self
    }

    /// The list with `arg` appended: the by-value form of [`ArgList::push`] that
    /// [`args!`](crate::args) chains.
    pub fn arg(mut self, arg: impl ListArg<'a>) -> Self {
        self.push(arg);
        self
    }

    /// Appends every argument of `args`, in order: `list.extend(&values)` for a slice or a
    /// `Vec` of numbers. The same as [`Extend::extend`], returning the list to chain.
    pub fn extend<A: ListArg<'a>>(&mut self, args: impl IntoIterator<Item = A>) -> &mut Self {
        for arg in args {
            self.push(arg);
        }
        self
    }

    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.layouts.as_slice().len()
    }

    /// Whether the list holds no argument.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for ArgList<'_> {
    fn default() -> Self {
        ArgList::new()
    }
}

impl<'a, A: ListArg<'a>> Extend<A> for ArgList<'a> {
    fn extend<I: IntoIterator<Item = A>>(&mut self, args: I) {
        ArgList::extend(self, args);
    }
}

impl<'a, A: ListArg<'a>> FromIterator<A> for ArgList<'a> {
    /// The list of every argument of `args`, in order: `values.iter().collect::<ArgList>()`.
    fn from_iter<I: IntoIterator<Item = A>>(args: I) -> Self {
        let mut list = ArgList::new();
        ArgList::extend(&mut list, args);
        list
    }
}

// SAFETY: `push` records each argument's layout (placed after the previous one, as C does), its
// meaning and its `ListArg::describe` pointer together, and the borrow `'a` keeps every argument
// alive and unmoved while the list lives.
unsafe impl KernelArgs for ArgList<'_> {
    fn layouts(&self) -> &[ParamLayout] {
        self.layouts.as_slice()
    }
    fn types(&self) -> &[&'static ArgType] {
        self.types.as_slice()
    }
    fn with_pointers<R>(&self, launch: impl FnOnce(*mut *mut c_void) -> R) -> R {
        launch(self.pointers.as_slice().as_ptr().cast_mut())
    }
}

/// An argument list for a launch, any length, checked like a tuple:
/// `kernel.launch(&config, cudyn::args![a, &x, &mut y, n])`.
///
/// Each argument is borrowed until the end of the statement that holds the macro, so use it
/// inside the launch call; to build a list across statements, use [`ArgList::push`] or
/// [`ArgList::extend`].
#[macro_export]
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        $crate::ArgList::new()$(.arg(&$arg))*
    };
}

/// A list that keeps its first [`INLINE_ARGS`] items inline and moves to the heap beyond.
#[derive(Debug)]
enum InlineFirst<T> {
    Inline { items: [T; INLINE_ARGS], len: usize },
    Heap(Vec<T>),
}

impl<T: Copy> InlineFirst<T> {
    /// An empty list; `blank` fills the unused inline slots.
    fn new(blank: T) -> Self {
        InlineFirst::Inline {
            items: [blank; INLINE_ARGS],
            len: 0,
        }
    }

    fn push(&mut self, item: T) {
        match self {
            InlineFirst::Inline { items, len } if *len < INLINE_ARGS => {
                items[*len] = item;
                *len += 1;
            }
            InlineFirst::Inline { items, .. } => {
                let mut heap = Vec::with_capacity(2 * INLINE_ARGS);
                heap.extend_from_slice(items);
                heap.push(item);
                *self = InlineFirst::Heap(heap);
            }
            InlineFirst::Heap(heap) => heap.push(item),
        }
    }

    fn as_slice(&self) -> &[T] {
        match self {
            InlineFirst::Inline { items, len } => &items[..*len],
            InlineFirst::Heap(heap) => heap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values behind the pointers `args` packs, read as `u64`s (every test argument here is
    /// a u64 or a device address).
    fn packed_u64s(args: impl KernelArgs) -> Vec<u64> {
        let count = args.layouts().len();
        args.with_pointers(|pointers| {
            (0..count)
                // SAFETY: `count` pointers, each to an 8-byte value alive during this closure.
                .map(|index| unsafe { *(*pointers.add(index)).cast::<u64>() })
                .collect()
        })
    }

    #[test]
    fn a_tuple_knows_its_c_layout() {
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Params {
            scale: f64,
            count: u32,
            _pad: u32,
        }
        // SAFETY: repr(C), numbers only, no padding.
        unsafe impl DeviceRepr for Params {}
        let x = DeviceBuffer::<u8>::alloc(0).unwrap();
        let args = (
            7u8,
            Params {
                scale: 1.0,
                count: 2,
                _pad: 0,
            },
            x.as_slice(),
            1i16,
            2.0f32,
        );
        assert_eq!(
            args.layouts(),
            [
                ParamLayout { offset: 0, size: 1 },
                ParamLayout {
                    offset: 8,
                    size: 16
                },
                ParamLayout {
                    offset: 24,
                    size: 8
                },
                ParamLayout {
                    offset: 32,
                    size: 2
                },
                ParamLayout {
                    offset: 36,
                    size: 4
                },
            ]
        );
    }

    #[test]
    fn packing_points_at_each_value() {
        let args = (1.5f32, 7u64, [1u8, 2, 3]);
        args.with_pointers(|pointers| {
            // SAFETY: three pointers into `args`, alive here, at values of these types.
            unsafe {
                assert_eq!(*(*pointers).cast::<f32>(), 1.5);
                assert_eq!(*(*pointers.add(1)).cast::<u64>(), 7);
                assert_eq!(*(*pointers.add(2)).cast::<[u8; 3]>(), [1, 2, 3]);
            }
        });
        let buffer = DeviceBuffer::<f32>::alloc(0).unwrap();
        assert_eq!(packed_u64s((&buffer, 9u64)), [buffer.as_raw(), 9]);
    }

    #[test]
    fn an_arg_list_matches_the_tuple_of_the_same_arguments() {
        let mut out = DeviceBuffer::<f32>::alloc(0).unwrap();
        let tuple = (2.0f64, 1u8, &mut out, [0u16; 3], 5i32);
        let (a, b, c, d, e) = &tuple;
        let list = ArgList::new().arg(a).arg(b).arg(c).arg(d).arg(e);
        assert_eq!(list.len(), 5);
        assert_eq!(list.layouts(), tuple.layouts());
        let listed = list.with_pointers(|pointers| {
            // SAFETY: five pointers, alive during this closure.
            (0..5)
                .map(|i| unsafe { *pointers.add(i) })
                .collect::<Vec<_>>()
        });
        let tupled = tuple.with_pointers(|pointers| {
            // SAFETY: as above.
            (0..5)
                .map(|i| unsafe { *pointers.add(i) })
                .collect::<Vec<_>>()
        });
        assert_eq!(listed, tupled);
    }

    #[test]
    fn the_args_macro_builds_the_same_list() {
        let x = DeviceBuffer::<f32>::alloc(0).unwrap();
        let tuple = (1.0f32, &x, 3u64);
        assert_eq!(crate::args![1.0f32, &x, 3u64].layouts(), tuple.layouts());
        assert!(crate::args![].is_empty());
    }

    #[test]
    fn a_list_longer_than_its_inline_storage_keeps_every_argument() {
        for count in [INLINE_ARGS - 1, INLINE_ARGS, INLINE_ARGS + 1, 200] {
            // Alternating 1- and 8-byte values: every other one is padded to 8.
            let bytes: Vec<u8> = (0..count as u8).collect();
            let words: Vec<u64> = (0..count as u64).map(|v| v << 32).collect();
            let mut list = ArgList::new();
            for (byte, word) in bytes.iter().zip(&words) {
                list.push(byte).push(word);
            }
            assert_eq!(list.len(), 2 * count);
            for (index, layout) in list.layouts().iter().enumerate() {
                let (offset, size) = if index % 2 == 0 {
                    (8 * index, 1)
                } else {
                    (8 * index, 8)
                };
                assert_eq!(*layout, ParamLayout { offset, size }, "{count}: {index}");
            }
            let values = list.with_pointers(|pointers| {
                (0..2 * count)
                    .map(|index| {
                        // SAFETY: one pointer per argument, each to a u8 or a u64 as pushed.
                        unsafe {
                            let pointer = *pointers.add(index);
                            if index % 2 == 0 {
                                u64::from(*pointer.cast::<u8>())
                            } else {
                                *pointer.cast::<u64>()
                            }
                        }
                    })
                    .collect::<Vec<_>>()
            });
            let expected: Vec<u64> = bytes
                .iter()
                .zip(&words)
                .flat_map(|(byte, word)| [u64::from(*byte), *word])
                .collect();
            assert_eq!(values, expected, "{count}");
        }
    }
}
