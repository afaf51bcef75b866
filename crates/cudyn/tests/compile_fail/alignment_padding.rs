// A float3 rounded up to 16 bytes by align(16): 4 bytes of tail padding.
#[derive(Clone, Copy, cudyn::DeviceRepr)]
#[repr(C, align(16))]
struct Float3Aligned {
    xyz: [f32; 3],
}

fn main() {}
