// The kernel of examples/hello_world.rs. `cudyn compile hello_world.cu --emit fatbin --arch sm_90
// -o device.fatbin` makes a fatbin of it for `cargo run -p cudyn --example hello_world --
// device.fatbin`.
extern "C" __global__ void helloWorld(int *visits) {
    printf("Hello from GPU thread %d\n", threadIdx.x);
    visits[threadIdx.x] = threadIdx.x + 1;
}
