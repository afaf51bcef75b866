#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[cudyn(krate = "cudyn")]
#[repr(C)]
struct Value {
    x: f32,
}

fn main() {}
