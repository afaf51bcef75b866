//! Any bytes: the structural validator that guards every load returns, never panics, and an image
//! it accepts can be inspected and searched without panicking either.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(image) = cudyn::Image::new(data) {
        if image.validate().is_ok() {
            let _ = image.inspect();
            let _ = image.param_layout("saxpy");
        }
    }
});
