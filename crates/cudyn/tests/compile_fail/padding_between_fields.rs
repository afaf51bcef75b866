// A u8 followed by a double: 7 bytes of padding the derive refuses, naming them.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Sample {
    kind: u8,
    value: f64,
}

fn main() {}
