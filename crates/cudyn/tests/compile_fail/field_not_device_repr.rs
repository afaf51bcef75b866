// A bool may only hold 0 or 1, and a reference is a host address: neither is DeviceRepr.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Flags {
    enabled: bool,
    _pad: [u8; 7],
    name: &'static str,
}

fn main() {}
