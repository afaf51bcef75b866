//! Any bytes: detection and inspection return, never panic. Seed the corpus with real images
//! (cubins, PTX, fatbins, host objects) for depth: `cargo fuzz run inspect corpus/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(inspection) = cudyn::inspect::inspect(data) {
        let _ = inspection.param_layout("saxpy");
    }
    if let Ok(image) = cudyn::Image::new(data) {
        let _ = image.param_layout("saxpy");
        let _ = image.kernel_list();
    }
});
