//! [`ParamLayout`]: where one kernel parameter lies in the kernel's parameter buffer.
//!
//! One type serves every place a layout comes from: the driver (`cuKernelGetParamInfo`), offline
//! inspection of a cubin's `.nv.info` or of PTX, and the C layout of the Rust arguments of a
//! launch. A launch is checked by comparing the kernel's layouts with the arguments' layouts.

use std::alloc::Layout;

/// Where one kernel parameter lies in the parameter buffer. A kernel's parameters are a slice of
/// these, in declaration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ParamLayout {
    /// Byte offset from the start of the parameter buffer.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

impl ParamLayout {
    /// The layout of a value of type `ty` placed after parameters that end at byte `end`: at the
    /// next offset that is a multiple of its alignment, as C lays out a parameter list.
    pub const fn following(end: usize, ty: Layout) -> ParamLayout {
        // A `Layout`'s alignment is a power of two, so a mask rounds up without a division.
        let mask = ty.align() - 1;
        ParamLayout {
            offset: (end + mask) & !mask,
            size: ty.size(),
        }
    }

    /// The C layout of a parameter list whose values have the types `types`, in order: each at
    /// the next offset aligned to its alignment. A `const fn`, so a tuple of arguments knows its
    /// layout at compile time.
    pub const fn c_layout<const N: usize>(types: [Layout; N]) -> [ParamLayout; N] {
        let mut layouts = [ParamLayout { offset: 0, size: 0 }; N];
        let mut end = 0;
        let mut index = 0;
        while index < N {
            layouts[index] = ParamLayout::following(end, types[index]);
            end = layouts[index].end();
            index += 1;
        }
        layouts
    }

    /// The byte just past the parameter.
    pub const fn end(&self) -> usize {
        self.offset + self.size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_follow_at_their_alignment() {
        let at = |end, size, align| {
            ParamLayout::following(end, Layout::from_size_align(size, align).unwrap())
        };
        assert_eq!(at(0, 8, 8), ParamLayout { offset: 0, size: 8 });
        assert_eq!(at(4, 8, 8), ParamLayout { offset: 8, size: 8 });
        assert_eq!(
            at(9, 4, 4),
            ParamLayout {
                offset: 12,
                size: 4
            }
        );
        assert_eq!(
            at(16, 16, 16),
            ParamLayout {
                offset: 16,
                size: 16
            }
        );
        assert_eq!(at(5, 1, 1), ParamLayout { offset: 5, size: 1 });
    }

    #[test]
    fn a_c_parameter_list_is_laid_out_in_order() {
        // void k(char c, double d, short s, float4 v, int i): float4 is 16-byte aligned.
        #[repr(C, align(16))]
        struct Float4([f32; 4]);
        let layouts = ParamLayout::c_layout([
            Layout::new::<i8>(),
            Layout::new::<f64>(),
            Layout::new::<i16>(),
            Layout::new::<Float4>(),
            Layout::new::<i32>(),
        ]);
        let expected = [(0, 1), (8, 8), (16, 2), (32, 16), (48, 4)];
        let got: Vec<(usize, usize)> = layouts.iter().map(|p| (p.offset, p.size)).collect();
        assert_eq!(got, expected);
        assert!(ParamLayout::c_layout([]).is_empty());
    }
}
