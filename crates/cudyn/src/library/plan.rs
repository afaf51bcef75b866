//! [`ParamPlan`]: what a launch checks its arguments against, and where a kernel's parameter
//! C types come from.

use super::kernel::Kernel;
use crate::ctype::{param_types_of_symbol, CType};
use crate::error::Result;
use crate::param::ParamLayout;

/// What a launch checks its arguments against, computed once per kernel: the parameters'
/// layout and, where the device code says them, their C types.
#[derive(Debug)]
pub(crate) struct ParamPlan {
    /// Offset and size of every parameter.
    pub(crate) layouts: Box<[ParamLayout]>,
    /// The C type of every parameter, `None` where only its size is known.
    pub(crate) types: Box<[Option<CType>]>,
    /// Whether any type is known: when none is, the check is by size only.
    pub(crate) typed: bool,
}

impl ParamPlan {
    /// The plan for parameters laid out as `layouts` of types `types`; types of another count
    /// than the layouts (device code that disagrees with its name) are not used.
    pub(crate) fn new(layouts: Box<[ParamLayout]>, types: Option<Vec<Option<CType>>>) -> Self {
        let types: Box<[Option<CType>]> = types
            .filter(|types| types.len() == layouts.len())
            .unwrap_or_else(|| vec![None; layouts.len()])
            .into();
        ParamPlan {
            typed: types.iter().any(Option::is_some),
            layouts,
            types,
        }
    }
}

impl Kernel {
    /// The C type of every parameter, in order, where the device code says it, and `None` where
    /// it gives only the size: from the demangled name of a C++ kernel (`axpy<float>(float,
    /// float const*, float*, int)`; this covers name expressions, which name mangled kernels),
    /// else from the PTX the library was loaded from (a width and float or integer, see
    /// [`CType::from_ptx`]). An `extern "C"` kernel from a cubin has sizes only: every entry is
    /// `None`, and its launches are checked by size and offset alone. Computed with
    /// [`Kernel::params`], once per kernel.
    ///
    /// ```no_run
    /// let kernel = cudyn::Library::from_file("axpy.cubin")?.kernel("axpy<float>")?;
    /// for (index, ty) in kernel.param_types()?.iter().enumerate() {
    ///     match ty {
    ///         Some(ty) => println!("parameter {index}: {ty}"),
    ///         None => println!("parameter {index}: size only"),
    ///     }
    /// }
    /// # Ok::<(), cudyn::Error>(())
    /// ```
    pub fn param_types(&self) -> Result<&[Option<CType>]> {
        Ok(&self.plan()?.types)
    }

    /// The parameter types the device code says: the mangled name's, else the PTX's.
    pub(super) fn query_types(&self) -> Option<Vec<Option<CType>>> {
        let name = self.name().ok()?;
        param_types_of_symbol(name).or_else(|| self.library()?.ptx_param_types(name))
    }
}
