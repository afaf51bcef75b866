//! CUDA version numbers.

use std::fmt;

use crate::digits::Decimal;

/// A CUDA version, `major.minor`, as the driver, runtime, NVRTC and nvJitLink report it.
///
/// Ordered, so that compatibility rules read as comparisons: `nvrtc > driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Version {
    /// The major version: 12 in 12.8.
    pub major: u32,
    /// The minor version: 8 in 12.8.
    pub minor: u32,
}

impl Version {
    /// A version from its parts.
    pub const fn new(major: u32, minor: u32) -> Self {
        Version { major, minor }
    }

    /// Decodes the integer form that `cuDriverGetVersion` and `cudaRuntimeGetVersion` return:
    /// `1000 * major + 10 * minor`, so 13000 is 13.0 and 12080 is 12.8.
    pub const fn from_cuda_int(encoded: i32) -> Self {
        let encoded = if encoded < 0 { 0 } else { encoded as u32 };
        Version {
            major: encoded / 1000,
            minor: (encoded % 1000) / 10,
        }
    }
}

impl Version {
    /// `major.minor`, the text [`Display`](fmt::Display) writes, built without the formatting
    /// machinery: the compile cache's key takes versions as text on the path of a warm start,
    /// where code run for the first time in a process is what a hit costs.
    pub(crate) fn dotted(&self) -> String {
        let mut text = String::with_capacity(8);
        text.push_str(Decimal::of(u64::from(self.major)).as_str());
        text.push('.');
        text.push_str(Decimal::of(u64::from(self.minor)).as_str());
        text
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dotted())
    }
}

#[cfg(test)]
mod tests {
    use super::Version;

    #[test]
    fn decodes_the_cuda_integer_form() {
        assert_eq!(Version::from_cuda_int(13000), Version::new(13, 0));
        assert_eq!(Version::from_cuda_int(12080), Version::new(12, 8));
        assert_eq!(Version::from_cuda_int(12090), Version::new(12, 9));
        assert_eq!(Version::from_cuda_int(-1), Version::new(0, 0));
        assert_eq!(Version::from_cuda_int(12080).to_string(), "12.8");
    }

    #[test]
    fn written_as_major_dot_minor() {
        for (major, minor, text) in [
            (0, 0, "0.0"),
            (9, 0, "9.0"),
            (12, 8, "12.8"),
            (13, 10, "13.10"),
            (u32::MAX, 1_000_000, "4294967295.1000000"),
        ] {
            let version = Version::new(major, minor);
            assert_eq!(version.dotted(), text);
            assert_eq!(version.to_string(), text);
        }
    }

    #[test]
    fn orders_by_major_then_minor() {
        assert!(Version::new(13, 5) > Version::new(13, 0));
        assert!(Version::new(13, 0) > Version::new(12, 9));
        assert!(Version::new(12, 8) >= Version::new(12, 8));
    }
}
