// 8 + 4 bytes of fields in a struct aligned to 8: 4 bytes of tail padding.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Params {
    scale: f64,
    count: u32,
}

fn main() {}
