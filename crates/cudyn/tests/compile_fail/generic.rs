// Whether Pair<T> has padding depends on T: refused, bounded or not.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct Pair<T> {
    first: T,
    second: T,
}

#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C)]
struct BoundedPair<T: cudyn::DeviceRepr> {
    first: T,
    second: T,
}

fn main() {}
