//! The inputs of a link: their kinds, told from their bytes, and what they hold.

use std::path::Path;

use cudyn::compile::InputKind;
use cudyn::inspect::Contents;
use cudyn::Image;

use crate::output::{self, CliError};

/// The kind nvJitLink is told, from the bytes (not the name), as [`Image::detect`] finds it.
pub fn kind(file: &Path, bytes: &[u8]) -> Result<InputKind, CliError> {
    let kind = Image::detect(bytes).map_err(|error| {
        CliError::new(format!(
            "{} is not an input nvJitLink links: give cubin, PTX, LTO-IR, fatbin, a host object \
             or a static library",
            crate::input::display(file)
        ))
        .source(error)
    })?;
    Ok(InputKind::of(kind))
}

/// How reports name an input kind.
pub fn kind_name(kind: InputKind) -> &'static str {
    match kind {
        InputKind::Cubin => "cubin",
        InputKind::Ptx => "ptx",
        InputKind::LtoIr => "ltoir",
        InputKind::Fatbin => "fatbin",
        InputKind::Object => "object",
        InputKind::Library => "library",
        InputKind::Any => "any",
        _ => "other",
    }
}

/// Refuses a static library none of whose members is device code or a host object with device
/// code: nvJitLink would link nothing of it, and say nothing.
pub fn refuse_library_without_device_code(file: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let inspection = Image::new(bytes).and_then(|image| image.inspect())?;
    let Contents::Archive(archive) = &inspection.contents else {
        return Ok(());
    };
    if archive.device_members() > 0 {
        return Ok(());
    }
    let members: Vec<String> = archive
        .members
        .iter()
        .map(|member| match &member.note {
            Some(note) => format!("{}: {note}", member.name),
            None => member.name.clone(),
        })
        .collect();
    Err(CliError::new(format!(
        "{} holds no device code: none of its {} member(s) is device code or a host object \
         built by nvcc with device code ({}); link the library that holds the kernels or \
         device functions, or leave this one out",
        crate::input::display(file),
        archive.members.len(),
        members.join("; ")
    )))
}

/// Why a link of `inputs` gave a cubin without a kernel: none of them defines one, or (when
/// some do) they hold them as machine code for the link's architecture that is not relocatable,
/// which nvJitLink takes as it is and links nothing of.
pub fn why_no_kernel(inputs: &[&[u8]]) -> String {
    let defined: usize = inputs
        .iter()
        .filter_map(|bytes| output::count_kernels(bytes))
        .sum();
    if defined == 0 {
        return "the linked cubin holds no kernel: no input defines one (an input of device \
                functions alone links into a cubin that cannot be launched)"
            .to_owned();
    }
    "the linked cubin holds no kernel, though the inputs define some: an input compiled \
     without relocatable device code (-rdc) gives a link nothing for an architecture it has \
     machine code for; compile it with -rdc=true (nvcc) or --rdc (cudyn compile), or load it \
     as it is"
        .to_owned()
}
