//! The messages between a batch, the compile server and its workers, and their framing.
//!
//! The server first writes one line of text, `cudyn-compile-server <protocol> <version> <pid>`,
//! so that any executable can be told apart from a compatible server before a byte of binary is
//! exchanged. After it, every message is a frame: its length (4 bytes, little-endian), the
//! message, and the message's blake3 hash (32 bytes), checked by every reader: a frame damaged
//! or cut short anywhere between the worker and the batch is refused, never taken for a result.
//! Inside a message, numbers are little-endian and text and bytes are length-prefixed.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::compile::{Arch, CacheUse, Compiled, CppStandard, Output, Program};
use crate::error::{CallError, Error};
use crate::sys::locate::{provider_of, Component};
use crate::version::Version;

/// The protocol's number: changed with any change to the messages below.
pub(super) const PROTOCOL: u32 = 2;

/// The first word of the server's greeting.
pub(super) const GREETING: &str = "cudyn-compile-server";

/// The largest message accepted: a cubin of a huge program is tens of MB.
const MAX_FRAME: usize = 1 << 30;

/// Writes `message` as one frame and flushes.
pub(super) fn write_frame(to: &mut impl Write, message: &[u8]) -> io::Result<()> {
    let length = u32::try_from(message.len())
        .ok()
        .filter(|&length| length as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message too long"))?;
    to.write_all(&length.to_le_bytes())?;
    to.write_all(message)?;
    to.write_all(blake3::hash(message).as_bytes())?;
    to.flush()
}

/// Reads one frame and checks its hash; `None` at a clean end of the stream.
pub(super) fn read_frame(from: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut length = [0; 4];
    match from.read(&mut length[..1])? {
        0 => return Ok(None),
        _ => from.read_exact(&mut length[1..])?,
    }
    let length = u32::from_le_bytes(length) as usize;
    if length > MAX_FRAME {
        return Err(damaged(format!("a frame claims {length} bytes")));
    }
    let mut message = vec![0; length];
    from.read_exact(&mut message)?;
    let mut hash = [0; 32];
    from.read_exact(&mut hash)?;
    if blake3::hash(&message) != blake3::Hash::from_bytes(hash) {
        return Err(damaged(
            "a frame's checksum does not match its bytes".into(),
        ));
    }
    Ok(Some(message))
}

fn damaged(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// A message being written.
#[derive(Debug, Default)]
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn new(tag: u8) -> Self {
        Writer(vec![tag])
    }

    pub(super) fn u8(&mut self, value: u8) -> &mut Self {
        self.0.push(value);
        self
    }

    pub(super) fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub(super) fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        self.u64(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    pub(super) fn text(&mut self, text: &str) -> &mut Self {
        self.bytes(text.as_bytes())
    }

    pub(super) fn texts<S: AsRef<str>>(&mut self, texts: &[S]) -> &mut Self {
        self.u64(texts.len() as u64);
        for text in texts {
            self.text(text.as_ref());
        }
        self
    }

    pub(super) fn paths(&mut self, paths: &[PathBuf]) -> &mut Self {
        self.u64(paths.len() as u64);
        for path in paths {
            self.bytes(path.as_os_str().as_encoded_bytes());
        }
        self
    }

    fn flag(&mut self, value: Option<bool>) -> &mut Self {
        self.u8(match value {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        })
    }

    fn pairs(&mut self, pairs: &[(String, String)]) -> &mut Self {
        self.u64(pairs.len() as u64);
        for (first, second) in pairs {
            self.text(first).text(second);
        }
        self
    }
}

/// A message being read; every read fails on a message that ends early or holds nonsense.
#[derive(Debug)]
pub(super) struct Reader<'a>(&'a [u8]);

/// What is wrong with a message that does not decode.
pub(super) type Malformed = String;

impl<'a> Reader<'a> {
    pub(super) fn new(message: &'a [u8]) -> Self {
        Reader(message)
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], Malformed> {
        if count > self.0.len() {
            return Err(format!(
                "a message ends {} bytes early",
                count - self.0.len()
            ));
        }
        let (taken, rest) = self.0.split_at(count);
        self.0 = rest;
        Ok(taken)
    }

    pub(super) fn u8(&mut self) -> Result<u8, Malformed> {
        Ok(self.take(1)?[0])
    }

    pub(super) fn u64(&mut self) -> Result<u64, Malformed> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    fn count(&mut self) -> Result<usize, Malformed> {
        let count = self.u64()?;
        usize::try_from(count)
            .ok()
            .filter(|&count| count <= self.0.len())
            .ok_or_else(|| format!("a message claims {count} items or bytes"))
    }

    pub(super) fn bytes(&mut self) -> Result<Vec<u8>, Malformed> {
        let count = self.count()?;
        Ok(self.take(count)?.to_vec())
    }

    pub(super) fn text(&mut self) -> Result<String, Malformed> {
        String::from_utf8(self.bytes()?)
            .map_err(|_| "a message holds text that is not UTF-8".into())
    }

    pub(super) fn texts(&mut self) -> Result<Vec<String>, Malformed> {
        (0..self.count()?).map(|_| self.text()).collect()
    }

    pub(super) fn paths(&mut self) -> Result<Vec<PathBuf>, Malformed> {
        use std::os::unix::ffi::OsStringExt;
        (0..self.count()?)
            .map(|_| Ok(PathBuf::from(std::ffi::OsString::from_vec(self.bytes()?))))
            .collect()
    }

    fn flag(&mut self) -> Result<Option<bool>, Malformed> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(false)),
            2 => Ok(Some(true)),
            other => Err(format!("a message holds {other} for a switch")),
        }
    }

    fn switch(&mut self) -> Result<bool, Malformed> {
        self.flag()?
            .ok_or_else(|| "a message leaves a switch unset".to_owned())
    }

    fn pairs(&mut self) -> Result<Vec<(String, String)>, Malformed> {
        (0..self.count()?)
            .map(|_| Ok((self.text()?, self.text()?)))
            .collect()
    }

    fn arch(&mut self) -> Result<Arch, Malformed> {
        let text = self.text()?;
        text.parse()
            .map_err(|_| format!("a message names `{text}` as the architecture"))
    }

    fn output(&mut self) -> Result<Output, Malformed> {
        let output = self.u8()?;
        OUTPUTS
            .get(usize::from(output))
            .copied()
            .ok_or_else(|| format!("a message holds {output} for the output"))
    }

    /// Fails unless the whole message was read.
    pub(super) fn end(&self) -> Result<(), Malformed> {
        match self.0.len() {
            0 => Ok(()),
            extra => Err(format!("a message has {extra} bytes too many")),
        }
    }
}

const OUTPUTS: [Output; 3] = [Output::Cubin, Output::Ptx, Output::LtoIr];
const STANDARDS: [CppStandard; 4] = [
    CppStandard::Cpp11,
    CppStandard::Cpp14,
    CppStandard::Cpp17,
    CppStandard::Cpp20,
];

fn output_number(output: Output) -> u8 {
    OUTPUTS
        .iter()
        .position(|&known| known == output)
        .unwrap_or(0) as u8
}

/// Message tags.
pub(super) const START: u8 = 1;
pub(super) const READY: u8 = 2;
pub(super) const JOB: u8 = 3;
pub(super) const OUTCOME: u8 = 4;

/// What the batch asks of a new server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Start {
    pub(super) workers: u64,
    /// The folders of [`crate::set_library_path`] in the batch's process, if it was called.
    pub(super) library_path: Option<Vec<PathBuf>>,
    /// How long one job may take before its worker is killed.
    pub(super) job_time_limit: Duration,
}

impl Start {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut writer = Writer::new(START);
        writer.u64(self.workers);
        match &self.library_path {
            Some(folders) => writer.flag(Some(true)).paths(folders),
            None => writer.flag(Some(false)),
        };
        writer.u64(self.job_time_limit.as_millis() as u64);
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, START)?;
        let start = Start {
            workers: reader.u64()?,
            library_path: match reader.switch()? {
                true => Some(reader.paths()?),
                false => None,
            },
            job_time_limit: Duration::from_millis(reader.u64()?),
        };
        reader.end()?;
        Ok(start)
    }
}

fn tagged(message: &[u8], tag: u8) -> Result<Reader<'_>, Malformed> {
    let mut reader = Reader::new(message);
    match reader.u8()? {
        found if found == tag => Ok(reader),
        found => Err(format!(
            "expected a message of kind {tag}, found kind {found}"
        )),
    }
}

/// The NVRTC a server compiles with, as it reports when ready; or why it cannot compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ready {
    pub(super) nvrtc: Result<NvrtcIdentity, String>,
}

/// NVRTC's file and version: what the compile cache's key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NvrtcIdentity {
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    pub(crate) modified: SystemTime,
    pub(crate) version: Version,
}

impl Ready {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut writer = Writer::new(READY);
        match &self.nvrtc {
            Ok(nvrtc) => {
                let since = nvrtc
                    .modified
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                writer
                    .flag(Some(true))
                    .paths(std::slice::from_ref(&nvrtc.path))
                    .u64(nvrtc.size)
                    .u64(since.as_secs())
                    .u64(u64::from(since.subsec_nanos()))
                    .u64(u64::from(nvrtc.version.major))
                    .u64(u64::from(nvrtc.version.minor))
            }
            Err(reason) => writer.flag(Some(false)).text(reason),
        };
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, READY)?;
        let nvrtc = match reader.switch()? {
            true => {
                let path = reader.paths()?.pop().ok_or("no NVRTC path")?;
                let size = reader.u64()?;
                let modified =
                    SystemTime::UNIX_EPOCH + Duration::new(reader.u64()?, reader.u64()? as u32);
                let version = Version::new(reader.u64()? as u32, reader.u64()? as u32);
                Ok(NvrtcIdentity {
                    path,
                    size,
                    modified,
                    version,
                })
            }
            false => Err(reader.text()?),
        };
        reader.end()?;
        Ok(Ready { nvrtc })
    }
}

/// One program to compile: everything its compile depends on. The architecture and CUDA's header
/// folders are decided by the batch (the caller's current device, the headers the cache's key
/// names), so that a worker compiles exactly what the calling process would have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Job {
    pub(super) id: u64,
    pub(super) arch: Arch,
    pub(super) defaults: Vec<PathBuf>,
    /// The calling process's working folder, from which relative include folders and file
    /// names are resolved.
    pub(super) folder: PathBuf,
    pub(super) program: Program,
}

impl Job {
    pub(super) fn encode(&self) -> Vec<u8> {
        let program = &self.program;
        let mut writer = Writer::new(JOB);
        writer
            .u64(self.id)
            .text(&self.arch.sm())
            .paths(&self.defaults)
            .paths(std::slice::from_ref(&self.folder))
            .text(&program.source)
            .text(&program.name)
            .u8(output_number(program.output))
            .u8(match program.standard {
                None => 0,
                Some(standard) => {
                    1 + STANDARDS.iter().position(|&s| s == standard).unwrap_or(0) as u8
                }
            });
        writer.u64(program.defines.len() as u64);
        for (name, value) in &program.defines {
            writer.text(name).flag(Some(value.is_some()));
            if let Some(value) = value {
                writer.text(value);
            }
        }
        writer
            .paths(&program.include_folders)
            .flag(Some(program.default_includes))
            .pairs(&program.headers)
            .flag(Some(program.fast_math))
            .flag(program.ftz)
            .flag(program.prec_div)
            .flag(program.prec_sqrt)
            .flag(program.fmad)
            .flag(Some(program.debug))
            .flag(Some(program.line_info))
            .flag(Some(program.relocatable))
            .texts(&program.extra)
            .texts(&program.name_expressions)
            .flag(Some(program.allow_newer_ptx));
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, JOB)?;
        let id = reader.u64()?;
        let arch = reader.arch()?;
        let defaults = reader.paths()?;
        let folder = reader
            .paths()?
            .pop()
            .ok_or("a job names no working folder")?;
        let mut program = Program::new(reader.text()?).name(reader.text()?);
        program.arch = Some(arch);
        program.output = reader.output()?;
        program.standard = match reader.u8()? {
            0 => None,
            n => Some(
                *STANDARDS
                    .get(usize::from(n - 1))
                    .ok_or_else(|| format!("a message holds {n} for the C++ standard"))?,
            ),
        };
        for _ in 0..reader.count()? {
            let name = reader.text()?;
            let value = reader.switch()?.then(|| reader.text()).transpose()?;
            program.defines.push((name, value));
        }
        program.include_folders = reader.paths()?;
        program.default_includes = reader.switch()?;
        program.headers = reader.pairs()?;
        program.fast_math = reader.switch()?;
        program.ftz = reader.flag()?;
        program.prec_div = reader.flag()?;
        program.prec_sqrt = reader.flag()?;
        program.fmad = reader.flag()?;
        program.debug = reader.switch()?;
        program.line_info = reader.switch()?;
        program.relocatable = reader.switch()?;
        program.extra = reader.texts()?;
        program.name_expressions = reader.texts()?;
        program.allow_newer_ptx = reader.switch()?;
        program.cache = false;
        reader.end()?;
        Ok(Job {
            id,
            arch,
            defaults,
            folder,
            program,
        })
    }
}

/// How a job ended.
#[derive(Debug, Clone)]
pub(crate) enum Outcome {
    /// What NVRTC produced.
    Compiled(Compiled),
    /// NVRTC's failure, as the calling process would have had it.
    Failed(Error),
    /// A failure this protocol does not carry: the batch compiles the program itself to get it.
    FailedOtherwise(String),
    /// The job's worker died or ran out of time; said by the server.
    Lost(String),
}

/// The NVRTC calls a compile makes, whose failures travel back as they are.
const NVRTC_CALLS: [&str; 13] = [
    "nvrtcCreateProgram",
    "nvrtcAddNameExpression",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcGetPTXSize",
    "nvrtcGetPTX",
    "nvrtcGetLTOIRSize",
    "nvrtcGetLTOIR",
    "nvrtcGetLoweredName",
    "nvrtcDestroyProgram",
];

/// A job's outcome as a message.
pub(super) fn encode_outcome(id: u64, outcome: &Outcome) -> Vec<u8> {
    let mut writer = Writer::new(OUTCOME);
    writer.u64(id);
    match outcome {
        Outcome::Compiled(compiled) => {
            writer
                .u8(0)
                .text(&compiled.name)
                .u8(output_number(compiled.output))
                .text(&compiled.arch.sm())
                .bytes(&compiled.code)
                .text(&compiled.log)
                .pairs(&compiled.lowered_names);
        }
        Outcome::Failed(Error::Cuda(call))
            if call.api == Component::Nvrtc && NVRTC_CALLS.contains(&call.call) =>
        {
            writer
                .u8(1)
                .text(call.call)
                .u64(call.code as u32 as u64)
                .text(&call.name)
                .text(&call.message);
            writer.flag(Some(call.log.is_some()));
            if let Some(log) = &call.log {
                writer.text(log);
            }
        }
        Outcome::Failed(Error::HeaderNotFound {
            header,
            searched,
            log,
            ..
        }) => {
            writer.u8(2).text(header).texts(searched).text(log);
        }
        Outcome::Failed(other) => {
            writer.u8(3).text(&other.to_string());
        }
        Outcome::FailedOtherwise(message) => {
            writer.u8(3).text(message);
        }
        Outcome::Lost(message) => {
            writer.u8(4).text(message);
        }
    }
    writer.0
}

/// A job's id and outcome from a message.
pub(super) fn decode_outcome(message: &[u8]) -> Result<(u64, Outcome), Malformed> {
    let mut reader = tagged(message, OUTCOME)?;
    let id = reader.u64()?;
    let outcome = match reader.u8()? {
        0 => Outcome::Compiled(Compiled {
            name: reader.text()?,
            output: reader.output()?,
            arch: reader.arch()?,
            code: reader.bytes()?.into(),
            log: reader.text()?,
            lowered_names: reader.pairs()?,
            checked: None,
            cache_use: CacheUse::Off,
        }),
        1 => {
            let call = reader.text()?;
            let call = NVRTC_CALLS
                .iter()
                .find(|known| **known == call)
                .ok_or_else(|| format!("a message names the unknown call `{call}`"))?;
            Outcome::Failed(Error::Cuda(Box::new(CallError {
                api: Component::Nvrtc,
                call,
                code: reader.u64()? as u32 as i32,
                name: reader.text()?,
                message: reader.text()?,
                log: reader.switch()?.then(|| reader.text()).transpose()?,
                hint: None,
            })))
        }
        2 => {
            let header = reader.text()?;
            Outcome::Failed(Error::HeaderNotFound {
                provider: provider_of(&header),
                header,
                searched: reader.texts()?,
                log: reader.text()?,
            })
        }
        3 => Outcome::FailedOtherwise(reader.text()?),
        4 => Outcome::Lost(reader.text()?),
        other => return Err(format!("a message holds {other} for an outcome")),
    };
    reader.end()?;
    Ok((id, outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_option() -> Program {
        Program::new("__global__ void k() {}")
            .name("k.cu")
            .output(Output::LtoIr)
            .std(CppStandard::Cpp20)
            .define("A")
            .define_value("B", "2")
            .include("/opt/include")
            .default_includes(false)
            .header("h.h", "#define H 1")
            .fast_math(true)
            .ftz(false)
            .prec_div(true)
            .fmad(false)
            .debug(true)
            .line_info(true)
            .relocatable(true)
            .option("--extra-device-vectorization")
            .name_expression("k")
            .allow_newer_ptx(true)
    }

    #[test]
    fn a_job_carries_every_input_of_a_compile() {
        let job = Job {
            id: 7,
            arch: Arch::new(9, 0),
            defaults: vec![PathBuf::from("/cuda/include")],
            folder: PathBuf::from("/home/me/project"),
            program: every_option(),
        };
        let decoded = Job::decode(&job.encode()).unwrap();
        let mut expected = job.program.clone().arch(Arch::new(9, 0)).cache(false);
        assert_eq!(decoded.program, expected);
        assert_eq!(
            (decoded.id, decoded.arch, &decoded.defaults, &decoded.folder),
            (7, job.arch, &job.defaults, &job.folder)
        );
        // Every field counts: a program that differs in any one of them decodes differently.
        expected = expected.prec_sqrt(true);
        assert_ne!(decoded.program, expected);
    }

    #[test]
    fn the_server_reports_its_nvrtc_or_why_not() {
        let nvrtc = NvrtcIdentity {
            path: PathBuf::from("/cuda/lib/libnvrtc.so.13"),
            size: 123,
            modified: SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5),
            version: Version::new(13, 0),
        };
        for ready in [
            Ready { nvrtc: Ok(nvrtc) },
            Ready {
                nvrtc: Err("no NVRTC".into()),
            },
        ] {
            assert_eq!(Ready::decode(&ready.encode()), Ok(ready));
        }
        let start = Start {
            workers: 16,
            library_path: Some(vec![PathBuf::from("/cuda/lib")]),
            job_time_limit: Duration::from_secs(600),
        };
        assert_eq!(Start::decode(&start.encode()), Ok(start.clone()));
        let searched = Start {
            library_path: None,
            ..start
        };
        assert_eq!(Start::decode(&searched.encode()), Ok(searched));
    }

    #[test]
    fn frames_refuse_damage() {
        let mut bytes = Vec::new();
        write_frame(&mut bytes, b"hello").unwrap();
        assert_eq!(read_frame(&mut &bytes[..]).unwrap().unwrap(), b"hello");
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
        let mut flipped = bytes.clone();
        flipped[5] ^= 1;
        let error = read_frame(&mut &flipped[..]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        let cut = &bytes[..bytes.len() - 1];
        assert!(read_frame(&mut &cut[..]).is_err());
    }

    #[test]
    fn outcomes_round_trip() {
        let compiled = Compiled {
            name: "k.cu".into(),
            output: Output::Ptx,
            arch: Arch::new(8, 6),
            code: vec![1, 2, 3].into(),
            log: "warning".into(),
            lowered_names: vec![("k<int>".into(), "_Z1kIiEvv".into())],
            checked: None,
            cache_use: CacheUse::Off,
        };
        let (id, outcome) =
            decode_outcome(&encode_outcome(3, &Outcome::Compiled(compiled.clone()))).unwrap();
        assert!(matches!(outcome, Outcome::Compiled(c) if c == compiled) && id == 3);
        let failure = Error::Cuda(Box::new(CallError {
            api: Component::Nvrtc,
            call: "nvrtcCompileProgram",
            code: 6,
            name: "NVRTC_ERROR_COMPILATION".into(),
            message: "compilation failed".into(),
            log: Some("k.cu(1): error".into()),
            hint: None,
        }));
        let (_, outcome) =
            decode_outcome(&encode_outcome(4, &Outcome::Failed(failure.clone()))).unwrap();
        assert!(
            matches!(&outcome, Outcome::Failed(e) if e.to_string() == failure.to_string()),
            "{outcome:?}"
        );
        let missing = Error::HeaderNotFound {
            header: "cuda_fp16.h".into(),
            searched: vec!["/mine".into()],
            provider: provider_of("cuda_fp16.h"),
            log: "log".into(),
        };
        let (_, outcome) =
            decode_outcome(&encode_outcome(5, &Outcome::Failed(missing.clone()))).unwrap();
        assert!(matches!(&outcome, Outcome::Failed(e) if e.to_string() == missing.to_string()));
    }
}
