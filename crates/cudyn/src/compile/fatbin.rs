//! `FatbinBuilder`: one fat binary holding device code for several architectures, built by
//! nvFatbin, as nvcc's `-gencode` options make it.

use super::target::Arch;
use crate::api::c_string;
use crate::api::nvfatbin as api;
use crate::error::{Error, Result};
use crate::sys::locate::Component;
use crate::sys::nvfatbin::nvFatbinHandle;

/// A fat binary being built: add SASS per real architecture and PTX per virtual one, then
/// [`finish`](FatbinBuilder::finish). The driver picks the SASS of the GPU's architecture, else
/// JIT-compiles the newest PTX that the GPU can run.
///
/// ```no_run
/// use cudyn::compile::{Arch, FatbinBuilder, Output, Program};
///
/// let source = "extern \"C\" __global__ void k(float *p) { *p = 1; }";
/// let mut fatbin = FatbinBuilder::new()?;
/// for arch in [Arch::new(8, 0), Arch::new(9, 0)] {
///     let cubin = Program::new(source).arch(arch).compile()?;
///     fatbin.add_cubin(cubin.code(), arch, "k.cu")?;
/// }
/// let ptx = Program::new(source).arch(Arch::new(9, 0)).output(Output::Ptx).compile()?;
/// fatbin.add_ptx(ptx.code(), Arch::new(9, 0), "k.cu")?;
/// std::fs::write("k.fatbin", fatbin.finish()?).expect("write");
/// # Ok::<(), cudyn::Error>(())
/// ```
#[derive(Debug)]
pub struct FatbinBuilder {
    raw: nvFatbinHandle,
    entries: usize,
}

impl FatbinBuilder {
    /// Starts an empty fat binary (`nvFatbinCreate`, no options).
    pub fn new() -> Result<Self> {
        let mut raw = std::ptr::null_mut();
        let created = api::create(&mut raw, &[]);
        if raw.is_null() {
            return Err(created.err().unwrap_or(Error::EmptyOutput {
                producer: Component::NvFatbin,
                what: "fatbin handle",
                hint: "the nvFatbin library is probably damaged; reinstall it",
            }));
        }
        let builder = FatbinBuilder { raw, entries: 0 };
        created?;
        Ok(builder)
    }

    /// Adds a cubin (SASS) for `arch`; `identifier` names the entry for tools like cuobjdump.
    pub fn add_cubin(&mut self, cubin: &[u8], arch: Arch, identifier: &str) -> Result<&mut Self> {
        let (arch, identifier) = entry_strings(arch, identifier)?;
        // SAFETY: the handle is live; nvFatbin copies the cubin during the call.
        unsafe { api::add_cubin(self.raw, cubin, &arch, &identifier) }?;
        self.entries += 1;
        Ok(self)
    }

    /// Adds PTX for the virtual architecture of `arch` (NUL-terminated or not).
    pub fn add_ptx(&mut self, ptx: &[u8], arch: Arch, identifier: &str) -> Result<&mut Self> {
        let (arch, identifier) = entry_strings(arch, identifier)?;
        // SAFETY: the handle is live; nvFatbin copies the PTX during the call.
        unsafe { api::add_ptx(self.raw, ptx, &arch, &identifier, c"") }?;
        self.entries += 1;
        Ok(self)
    }

    /// Adds LTO-IR for `arch`, for a later link with link-time optimization.
    pub fn add_ltoir(&mut self, ltoir: &[u8], arch: Arch, identifier: &str) -> Result<&mut Self> {
        let (arch, identifier) = entry_strings(arch, identifier)?;
        // SAFETY: the handle is live; nvFatbin copies the LTO-IR during the call.
        unsafe { api::add_ltoir(self.raw, ltoir, &arch, &identifier, c"") }?;
        self.entries += 1;
        Ok(self)
    }

    /// How many entries were added.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The fat binary, ready for `cudaLibraryLoadData` or a file.
    pub fn finish(self) -> Result<Vec<u8>> {
        // SAFETY: the handle is live.
        let fatbin = unsafe { api::get(self.raw) }?;
        if fatbin.is_empty() {
            return Err(Error::EmptyOutput {
                producer: Component::NvFatbin,
                what: "fatbin",
                hint: "add at least one entry before finishing",
            });
        }
        Ok(fatbin)
    }
}

/// The architecture as nvFatbin takes it (`90a`, the digits of `sm_90a`), and the identifier, as
/// C strings.
fn entry_strings(arch: Arch, identifier: &str) -> Result<(std::ffi::CString, std::ffi::CString)> {
    let digits = arch.sm().trim_start_matches("sm_").to_owned();
    Ok((
        c_string("architecture", &digits)?,
        c_string("fatbin entry identifier", identifier)?,
    ))
}

impl Drop for FatbinBuilder {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed once; a failure leaks it, nothing more.
        let _ = unsafe { api::destroy(&mut self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{Output, Program};
    use crate::inspect::fatbin::EntryKind;
    use crate::inspect::Contents;
    use crate::Image;

    const SOURCE: &str = "extern \"C\" __global__ void fill(float *p) { p[threadIdx.x] = 1; }";

    #[test]
    fn holds_sass_per_real_arch_and_ptx_per_virtual_arch() {
        let mut builder = FatbinBuilder::new().expect("nvFatbin (scripts/cuda-wheels)");
        let sm_80 = Arch::new(8, 0);
        let sm_90 = Arch::new(9, 0);
        for arch in [sm_80, sm_90] {
            let cubin = Program::new(SOURCE).arch(arch).compile().unwrap();
            builder.add_cubin(cubin.code(), arch, "fill.cu").unwrap();
        }
        let ptx = Program::new(SOURCE)
            .arch(sm_90)
            .output(Output::Ptx)
            .allow_newer_ptx(true)
            .compile()
            .unwrap();
        builder.add_ptx(ptx.code(), sm_90, "fill.cu").unwrap();
        assert_eq!(builder.entries(), 3);
        let fatbin = builder.finish().unwrap();

        let inspection = Image::new(fatbin).unwrap().inspect().unwrap();
        let Contents::Fatbin(fatbin) = inspection.contents else {
            panic!("not a fatbin: {:?}", inspection.contents);
        };
        let mut entries: Vec<(EntryKind, u32)> = fatbin
            .entries
            .iter()
            .map(|entry| (entry.kind, entry.arch))
            .collect();
        entries.sort_by_key(|(kind, arch)| (format!("{kind:?}"), *arch));
        assert_eq!(
            entries,
            [
                (EntryKind::Ptx, 90),
                (EntryKind::Sass, 80),
                (EntryKind::Sass, 90)
            ]
        );
    }

    #[test]
    fn a_cubin_under_the_wrong_arch_is_refused() {
        let cubin = Program::new(SOURCE)
            .arch(Arch::new(8, 0))
            .compile()
            .unwrap();
        let mut builder = FatbinBuilder::new().unwrap();
        let error = builder
            .add_cubin(cubin.code(), Arch::new(9, 0), "fill.cu")
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("NVFATBIN_ERROR_ELF_ARCH_MISMATCH"),
            "{error}"
        );
    }
}
