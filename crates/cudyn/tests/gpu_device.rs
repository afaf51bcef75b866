//! Devices as the driver reports them, checked against the runtime's own answer.

use cudyn::sys::{self, call, runtime};
use cudyn::Device;

#[test]
#[ignore = "gpu: needs the NVIDIA driver and a GPU"]
fn devices_agree_with_the_runtime() {
    let count = Device::count().expect("the driver lists devices");
    assert!(count > 0, "no GPU");
    let rt = sys::runtime().expect("the CUDA runtime opens");
    let mut runtime_count = 0;
    // SAFETY: writes one int.
    unsafe { call!(rt, cudaGetDeviceCount(&mut runtime_count)) }.unwrap();
    assert_eq!(count, runtime_count as usize);
    for device in Device::all().unwrap() {
        let (major, minor) = device.compute_capability().unwrap();
        let ordinal = device.ordinal() as i32;
        let (mut rt_major, mut rt_minor) = (0, 0);
        // SAFETY: each call writes one int for a valid ordinal.
        unsafe {
            call!(
                rt,
                cudaDeviceGetAttribute(
                    &mut rt_major,
                    runtime::cudaDevAttrComputeCapabilityMajor,
                    ordinal
                )
            )
            .unwrap();
            call!(
                rt,
                cudaDeviceGetAttribute(
                    &mut rt_minor,
                    runtime::cudaDevAttrComputeCapabilityMinor,
                    ordinal
                )
            )
            .unwrap();
        }
        assert_eq!((major, minor), (rt_major as u32, rt_minor as u32));
        assert!(!device.name().unwrap().is_empty());
        assert!(device.total_memory().unwrap() > 1 << 30);
    }
    assert!(
        Device::get(count).is_err(),
        "an ordinal past the end is an error"
    );
}
