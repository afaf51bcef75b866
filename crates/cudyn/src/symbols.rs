//! Kernel names: a symbol as the library has it, or the C++ name a person writes.
//!
//! Kernels without C linkage are known to the driver by their Itanium-mangled symbols
//! (`_Z4axpyIfEvT_PKS0_PS0_i`). A person writes `axpy<float>`. [`resolve`] relates the two by
//! demangling every symbol of the library, so the same lookup serves code compiled by nvcc or by
//! NVRTC, loaded from memory or from a file.

use std::fmt;

use cpp_demangle::{DemangleOptions, Symbol};

/// A kernel as the driver and people name it: its symbol and, for a C++ kernel, its C++ name
/// and signature. [`Image::kernel_list`](crate::Image::kernel_list) and
/// [`Library::kernel_list`](crate::Library::kernel_list) list them.
///
/// ```no_run
/// let image = cudyn::Image::from_file("kernels.fatbin")?;
/// for kernel in image.kernel_list()? {
///     // e.g. `blas::axpy<float>(float, float const*, float*, int)  [_ZN4blas4axpyIfEEvT_PKS1_PS1_i]`
///     println!("{kernel}  [{}]", kernel.symbol);
/// }
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct KernelName {
    /// The symbol the driver knows the kernel by: its own name for an `extern "C"` kernel, else
    /// its mangled name. [`Library::kernel`](crate::Library::kernel) takes it as it is.
    pub symbol: String,
    /// The qualified C++ name with its template arguments, e.g. `blas::axpy<float>`; the symbol
    /// for an `extern "C"` kernel (or a symbol that does not demangle).
    pub name: String,
    /// The C++ signature, the name with its parameter types, e.g.
    /// `blas::axpy<float>(float, float const*, float*, int)`; `None` for an `extern "C"` kernel
    /// (or a symbol that does not demangle). [`Library::kernel`](crate::Library::kernel) finds
    /// the kernel by it, even among overloads.
    pub signature: Option<String>,
}

impl KernelName {
    /// The names of the kernel whose symbol is `symbol`.
    pub fn new(symbol: impl Into<String>) -> KernelName {
        let symbol = symbol.into();
        match cpp_names(&symbol) {
            Some(names) => KernelName {
                name: names.name,
                signature: Some(names.signature),
                symbol,
            },
            None => KernelName {
                name: symbol.clone(),
                signature: None,
                symbol,
            },
        }
    }
}

impl fmt::Display for KernelName {
    /// The signature, or the symbol of an `extern "C"` kernel: the most precise name a person
    /// writes for it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.signature.as_deref().unwrap_or(&self.symbol))
    }
}

/// The kernels of `symbols` with their names, each symbol once, sorted by C++ name, then
/// signature, then symbol: the same order whatever order the symbols came in.
pub(crate) fn kernel_list(symbols: impl IntoIterator<Item = String>) -> Vec<KernelName> {
    let mut kernels: Vec<KernelName> = symbols.into_iter().map(KernelName::new).collect();
    kernels.sort_by(|a, b| {
        (&a.name, &a.signature, &a.symbol).cmp(&(&b.name, &b.signature, &b.symbol))
    });
    kernels.dedup_by(|a, b| a.symbol == b.symbol);
    kernels
}

/// What a name fits among a library's kernel symbols.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// Exactly one kernel: its symbol.
    One(String),
    /// Several kernels, each as its C++ signature followed by its symbol in parentheses.
    Ambiguous(Vec<String>),
    /// None.
    NotFound,
}

/// Finds the kernel `wanted` names among `symbols`: the symbol itself, or a C++ name of it (see
/// [`cpp_names`]). Spaces are ignored when C++ names are compared.
pub(crate) fn resolve(wanted: &str, symbols: &[String]) -> Resolved {
    if let Some(symbol) = symbols.iter().find(|symbol| *symbol == wanted) {
        return Resolved::One(symbol.clone());
    }
    let wanted = without_spaces(wanted);
    let mut matches: Vec<(&String, CppNames)> = symbols
        .iter()
        .filter_map(|symbol| Some((symbol, cpp_names(symbol)?)))
        .filter(|(_, names)| names.all().any(|name| without_spaces(name) == wanted))
        .collect();
    match matches.len() {
        0 => Resolved::NotFound,
        1 => Resolved::One(matches.remove(0).0.clone()),
        _ => Resolved::Ambiguous(
            matches
                .into_iter()
                .map(|(symbol, names)| format!("{} ({symbol})", names.signature))
                .collect(),
        ),
    }
}

/// The names by which a person may ask for a mangled kernel, each a demangled form of its symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CppNames {
    /// The qualified name with its template arguments: `ns::axpy<float>`.
    pub(crate) name: String,
    /// The qualified name without the template arguments of the function itself: `ns::axpy`.
    pub(crate) template: String,
    /// The name with its parameters: `ns::axpy<float>(float, float const*, float*, int)`.
    pub(crate) signature: String,
    /// The whole declaration, with the return type of a template:
    /// `void ns::axpy<float>(float, float const*, float*, int)`.
    pub(crate) declaration: String,
}

impl CppNames {
    fn all(&self) -> impl Iterator<Item = &str> {
        [
            &self.name,
            &self.template,
            &self.signature,
            &self.declaration,
        ]
        .into_iter()
        .map(String::as_str)
    }
}

/// Longest symbol name handed to the demangler: real names are far shorter, and the demangler's
/// time grows with its input.
const MAX_DEMANGLE_LEN: usize = 4096;

/// The C++ name for an Itanium-mangled symbol (`_Z...`); `None` for a plain C name or one that
/// does not demangle.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || name.len() > MAX_DEMANGLE_LEN {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    // `Symbol::demangle` starts from an empty String and grows it piece by piece: for the
    // templated names of CUB and libcu++ (hundreds per cubin, most of an inspection's time) the
    // regrowing was a tenth of the demangling. C++ names rarely demangle to more than twice their
    // mangled length; a longer one grows past it as before.
    let mut demangled = String::with_capacity(name.len().saturating_mul(2));
    symbol
        .structured_demangle(&mut demangled, &cpp_demangle::DemangleOptions::default())
        .ok()?;
    Some(demangled)
}

/// The C++ names of an Itanium-mangled `symbol`; `None` for a C name or one that does not
/// demangle.
pub(crate) fn cpp_names(symbol: &str) -> Option<CppNames> {
    if !symbol.starts_with("_Z") || symbol.len() > MAX_DEMANGLE_LEN {
        return None;
    }
    let parsed = Symbol::new(symbol).ok()?;
    let demangle = |options| parsed.demangle_with_options(&options).ok();
    let name = demangle(DemangleOptions::new().no_params().no_return_type())?;
    let template = strip_template_arguments(&name).to_owned();
    Some(CppNames {
        signature: demangle(DemangleOptions::new().no_return_type())?,
        declaration: demangle(DemangleOptions::new())?,
        template,
        name,
    })
}

/// `name` without the template argument list that ends it: `ns::axpy<float>` gives `ns::axpy`.
fn strip_template_arguments(name: &str) -> &str {
    if !name.ends_with('>') {
        return name;
    }
    let mut depth = 0usize;
    for (index, byte) in name.bytes().enumerate().rev() {
        match byte {
            b'>' => depth += 1,
            b'<' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &name[..index];
                }
            }
            _ => {}
        }
    }
    name
}

fn without_spaces(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `names` sorted by edit distance to `wanted`, nearest first, ties by name.
pub(crate) fn nearest_first(wanted: &str, mut names: Vec<String>) -> Vec<String> {
    names.sort_by_cached_key(|name| (strsim::levenshtein(wanted, name), name.clone()));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn unknown_kernel_names_are_listed_nearest_first() {
        let names = symbols(&["saxpy_f64", "reduce", "saxpy", "scale"]);
        assert_eq!(
            nearest_first("saxpi", names),
            ["saxpy", "scale", "saxpy_f64", "reduce"]
        );
    }

    #[test]
    fn a_kernel_list_names_each_symbol_once_in_one_order() {
        let symbols = [
            "_Z5scalePfi",
            "plain",
            "_Z5scalePdi",
            "plain",
            "_Z5",
            "_Z5scalePfi",
        ];
        let listed = kernel_list(symbols.map(String::from));
        let described: Vec<(&str, &str, Option<&str>)> = listed
            .iter()
            .map(|k| (k.symbol.as_str(), k.name.as_str(), k.signature.as_deref()))
            .collect();
        assert_eq!(
            described,
            [
                // A symbol that does not demangle is its own name, as an extern "C" one.
                ("_Z5", "_Z5", None),
                ("plain", "plain", None),
                ("_Z5scalePdi", "scale", Some("scale(double*, int)")),
                ("_Z5scalePfi", "scale", Some("scale(float*, int)")),
            ]
        );
        let mut reversed = symbols.map(String::from);
        reversed.reverse();
        assert_eq!(kernel_list(reversed), listed);
        let shown: Vec<String> = listed.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["_Z5", "plain", "scale(double*, int)", "scale(float*, int)"]
        );
    }

    #[test]
    fn template_arguments_are_stripped_from_the_end_only() {
        assert_eq!(strip_template_arguments("axpy<float>"), "axpy");
        assert_eq!(strip_template_arguments("ns::f<a<b>, 3>"), "ns::f");
        assert_eq!(strip_template_arguments("helloWorld"), "helloWorld");
    }

    #[test]
    fn plain_symbols_match_only_themselves() {
        let library = symbols(&["saxpy", "fill"]);
        assert_eq!(resolve("fill", &library), Resolved::One("fill".into()));
        assert_eq!(resolve("fil", &library), Resolved::NotFound);
    }

    /// A template instantiated twice, an overload set, a namespaced kernel and a C kernel
    /// (the GPU tests load the same source built by nvcc), compiled by NVRTC to a cubin; the
    /// symbols are read from it offline, as the driver would list them.
    const CPP_NAMES: &str = include_str!("../tests/kernels/cpp_names.cu");

    fn compiled_symbols() -> Vec<String> {
        let compiled = crate::Program::new(CPP_NAMES)
            .arch(crate::compile::Arch::new(9, 0))
            .compile()
            .expect("NVRTC compiles the kernels (run the tests with the CUDA wheels' venv)");
        let inspection = crate::inspect::inspect(compiled.code()).expect("a readable cubin");
        let crate::inspect::Contents::Cubin(cubin) = inspection.contents else {
            panic!("NVRTC produced {:?}, not a cubin", inspection.kind);
        };
        cubin
            .kernels
            .into_iter()
            .map(|kernel| kernel.name)
            .collect()
    }

    fn symbol_of(resolved: Resolved) -> String {
        match resolved {
            Resolved::One(symbol) => symbol,
            other => panic!("expected one kernel, got {other:?}"),
        }
    }

    #[test]
    fn kernels_compiled_from_cpp_are_found_by_their_cpp_names() {
        let symbols = compiled_symbols();
        assert_eq!(symbols.len(), 6, "{symbols:?}");
        let axpy_float = symbol_of(resolve("axpy<float>", &symbols));
        assert_eq!(axpy_float, "_Z4axpyIfEvT_PKS0_PS0_i");
        let axpy_double = symbol_of(resolve("axpy<double>", &symbols));
        assert_eq!(axpy_double, "_Z4axpyIdEvT_PKS0_PS0_i");
        // The signature, with or without the return type, in any spacing.
        assert_eq!(
            symbol_of(resolve(
                "axpy<float>(float, float const*, float*, int)",
                &symbols
            )),
            axpy_float
        );
        assert_eq!(
            symbol_of(resolve(
                "void axpy<double>(double,double const*,double*,int)",
                &symbols
            )),
            axpy_double
        );
        assert_eq!(
            symbol_of(resolve("scale(double*, int)", &symbols)),
            "_Z5scalePdi"
        );
        assert_eq!(
            symbol_of(resolve("blas::zero", &symbols)),
            "_ZN4blas4zeroEPf"
        );
        assert_eq!(symbol_of(resolve("plain", &symbols)), "plain");
        // Symbols still work as they are.
        assert_eq!(symbol_of(resolve("_Z5scalePfi", &symbols)), "_Z5scalePfi");
    }

    #[test]
    fn a_name_fitting_several_kernels_lists_them_all() {
        let symbols = compiled_symbols();
        for (name, expected) in [
            (
                "scale",
                [
                    "scale(float*, int) (_Z5scalePfi)",
                    "scale(double*, int) (_Z5scalePdi)",
                ],
            ),
            (
                "axpy",
                [
                    "axpy<float>(float, float const*, float*, int) (_Z4axpyIfEvT_PKS0_PS0_i)",
                    "axpy<double>(double, double const*, double*, int) (_Z4axpyIdEvT_PKS0_PS0_i)",
                ],
            ),
        ] {
            let Resolved::Ambiguous(mut candidates) = resolve(name, &symbols) else {
                panic!("{name} should be ambiguous among {symbols:?}");
            };
            candidates.sort();
            let mut expected = expected.map(String::from).to_vec();
            expected.sort();
            assert_eq!(candidates, expected, "{name}");
        }
    }

    #[test]
    fn names_fitting_no_kernel_are_not_found() {
        let symbols = compiled_symbols();
        for name in [
            "axpy<int>",
            "zero",
            "scale(int*, int)",
            "blas::zero<float>",
            "plai",
        ] {
            assert_eq!(resolve(name, &symbols), Resolved::NotFound, "{name}");
        }
    }

    #[test]
    fn name_expressions_lowered_by_nvrtc_resolve_to_their_own_symbols() {
        // What a cubin saved from NVRTC loses is the map from expression to lowered name; the
        // demangled symbols give it back.
        let compiled = crate::Program::new(
            "template <typename T> __global__ void fill(T* out, T value) { out[threadIdx.x] = value; }",
        )
        .arch(crate::compile::Arch::new(9, 0))
        .name_expression("fill<float>")
        .name_expression("fill<unsigned int>")
        .compile()
        .expect("NVRTC compiles the template");
        let symbols: Vec<String> = compiled
            .lowered_names()
            .map(|(_, lowered)| lowered.to_owned())
            .collect();
        for (expression, lowered) in compiled.lowered_names() {
            assert_eq!(
                symbol_of(resolve(expression, &symbols)),
                lowered,
                "{expression}"
            );
        }
    }
}

#[cfg(test)]
mod demangle_tests {
    use super::demangle;

    /// The demangler's own `demangle`, which `demangle` must match while writing into a buffer
    /// of its own.
    fn reference(name: &str) -> Option<String> {
        cpp_demangle::Symbol::new(name).ok()?.demangle().ok()
    }

    #[test]
    fn demangles_as_the_demangler_does_whatever_the_length_ratio() {
        let names = [
            // From CUB's cubins: more than twice as long demangled, past the buffer's first size.
            "_ZN4cuda3std3__411__type_listIJhtjmyEE6__sizeE",
            "_ZN4cuda3std3__46chrono8durationIlNS1_5ratioILx3600ELx1EEEE13__no_overflowIS5_S5_E4__n1E",
            // Shorter demangled than mangled.
            "_ZN47_INTERNAL_00000000_16_cub_block_sum_cu_0c3cb6134cuda3std3__449_GLOBAL__N__00000000_16_cub_block_sum_cu_0c3cb6136ignoreE",
            "_ZN5space3fooEibc",
            "_Z5saxpyfPKfPf",
        ];
        for name in names {
            let demangled = demangle(name);
            assert!(demangled.is_some(), "{name}");
            assert_eq!(demangled, reference(name), "{name}");
        }
    }

    #[test]
    fn names_that_do_not_demangle_give_none() {
        for name in ["saxpy", "_Z", "_ZN5space3fooEibc trailing", "_ZN5space"] {
            assert_eq!(demangle(name), None, "{name}");
        }
    }
}
