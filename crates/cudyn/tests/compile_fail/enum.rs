#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
enum Mode {
    Fast,
    Exact,
}

fn main() {}
