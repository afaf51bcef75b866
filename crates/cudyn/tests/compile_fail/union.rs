#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
union Bits {
    float: f32,
    int: u32,
}

fn main() {}
