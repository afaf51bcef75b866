// Size 0 in Rust, 1 in C++.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Nothing;

fn main() {}
