//! The parameter layouts the driver reports (`cuKernelGetParamInfo`) and the ones cudyn reads
//! offline from the same device code agree, so launches on drivers without that query are
//! checked against the right layout.

use cudyn::compile::{Output, Program};
use cudyn::{Image, Library};

const KERNELS: &str = r#"
struct Coefficients { float a; double b; char tag; };

extern "C" __global__ void saxpy(float a, const float *x, const float *y, float *out, size_t n) {}

extern "C" __global__ void by_value(Coefficients c, int n, short s, double d) {}

extern "C" __global__ void many(int p0, float p1, double p2, char p3, long long p4, int p5,
                                float *p6, short p7, int p8, double p9, int p10, char p11,
                                float p12, int p13, size_t p14, int p15, float p16, int p17,
                                double p18, char p19, int p20, float p21) {}

template <typename T> __global__ void scale(T *data, T factor, unsigned n) {}
"#;

#[test]
#[ignore = "gpu: compares the driver's parameter layouts with the offline ones"]
fn driver_and_offline_parameter_layouts_agree() {
    for output in [Output::Cubin, Output::Ptx] {
        let program = Program::new(KERNELS)
            .output(output)
            .name_expression("scale<double>");
        let compiled = program.compile().unwrap();
        let library = Library::loader().load_compiled(&compiled).unwrap();
        let image = Image::new(compiled.code()).unwrap();
        let lowered = compiled.lowered_name("scale<double>").unwrap();
        for name in ["saxpy", "by_value", "many", lowered] {
            let kernel = library.kernel(name).unwrap();
            let driver: Vec<(usize, usize)> = kernel
                .params()
                .unwrap()
                .iter()
                .map(|p| (p.offset, p.size))
                .collect();
            let offline: Vec<(usize, usize)> = image
                .param_layout(name)
                .unwrap()
                .iter()
                .map(|p| (p.offset, p.size))
                .collect();
            assert_eq!(driver, offline, "{name} from {output:?}");
            assert!(!driver.is_empty(), "{name}");
        }
        let many = library.kernel("many").unwrap();
        assert_eq!(many.params().unwrap().len(), 22);
    }
}
