//! [`Pack`]: a struct with padding, passed to the device with its padding bytes zeroed.

use super::DeviceRepr;

/// A `#[repr(C)]` struct with padding, which `#[derive(DeviceRepr)]` with `#[cudyn(padded)]`
/// packs into a value without padding: the struct's bytes with every padding byte zero.
///
/// A struct with padding cannot be [`DeviceRepr`] itself, since copying it byte for byte would
/// hand the device uninitialized bytes. Instead of spelling the padding as `_pad` fields, let the
/// derive pack it: [`Pack::pack`] writes each field at its offset into a zeroed byte array of the
/// struct's size and alignment, which is `DeviceRepr` and means the same C type (the struct's
/// `c_name`) to the launch check.
///
/// ```
/// # #[cfg(feature = "derive")] {
/// use cudyn::Pack;
///
/// // struct Params { char kind; double scale; int count; };  (24 bytes, 11 of them padding)
/// #[derive(Clone, Copy, cudyn::DeviceRepr)]
/// #[cudyn(c_name = "Params", padded)]
/// #[repr(C)]
/// struct Params {
///     kind: u8,
///     scale: f64,
///     count: i32,
/// }
///
/// let packed = Params { kind: 1, scale: 0.5, count: 7 }.pack();
/// assert_eq!(std::mem::size_of_val(&packed), 24);
/// // kernel.launch(&config, (packed, &mut out)), or DeviceBuffer::from_slice(&[packed]).
/// # }
/// ```
///
/// # Safety
/// `Packed` has the size and alignment of `Self`, and [`Pack::pack`] returns `self`'s fields,
/// each at its offset in `Self`, every other byte zero.
pub unsafe trait Pack: Copy + 'static {
    /// The packed value: the struct's bytes, padding zeroed.
    type Packed: DeviceRepr;
    /// The value with its padding zeroed, to pass to a kernel or store in a buffer.
    fn pack(&self) -> Self::Packed;
}

/// Writes the bytes of `field`, a field of a packed struct, at `offset` of `bytes`: what the
/// derive's [`Pack::pack`] does for each field.
///
/// # Panics
/// Never for the derive's calls, whose offsets come from `offset_of!` in a struct of
/// `bytes.len()` bytes; a call with a field beyond `bytes` panics.
pub(super) fn write_field<F: DeviceRepr>(field: &F, bytes: &mut [u8], offset: usize) {
    // SAFETY: a DeviceRepr value has no padding, so all of its `size_of::<F>()` bytes are
    // initialized; they are borrowed as long as `field`.
    let field_bytes = unsafe {
        std::slice::from_raw_parts(std::ptr::from_ref(field).cast::<u8>(), size_of::<F>())
    };
    bytes[offset..offset + field_bytes.len()].copy_from_slice(field_bytes);
}
