// Rust may reorder the fields of a struct without #[repr(C)].
#[derive(Clone, Copy, cudyn::DeviceRepr)]
struct Point {
    x: f32,
    y: f32,
}

fn main() {}
