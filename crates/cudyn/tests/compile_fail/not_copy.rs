// DeviceRepr values are copied byte for byte, so the type must be Copy.
#[derive(cudyn::DeviceRepr)]
#[repr(C)]
struct Value {
    x: f32,
}

fn main() {}
