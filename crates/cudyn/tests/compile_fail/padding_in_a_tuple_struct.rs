// A tuple struct's fields are named by index; one byte of padding is one byte.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Pair(u8, u16);

fn main() {}
