//! Two structs of the same size and different C types, `Odd` and `Even`, in CUDA and in Rust
//! (derived with their C names), for the tests of the type check.

/// The CUDA side.
pub const CUDA: &str = "struct Odd { int a; float b; };\nstruct Even { float a; int b; };\n";

/// `struct Odd { int a; float b; }`.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[cudyn(c_name = "Odd")]
#[repr(C)]
pub struct Odd {
    pub a: i32,
    pub b: f32,
}

/// `struct Even { float a; int b; }`: the size of `Odd`, another type.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[cudyn(c_name = "Even")]
#[repr(C)]
pub struct Even {
    pub a: f32,
    pub b: i32,
}
