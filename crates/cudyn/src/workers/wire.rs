//! The messages between a batch, the compile server and its workers, and their framing: the
//! protocol the [module documentation](super) describes. Fields are [`crate::codec`]'s; the tags,
//! the order of fields and the frames are this protocol's own.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::codec::{self, Malformed, Reader, Writer};
use crate::compile::{Arch, CacheUse, Compiled, CppStandard, Output, Program};
use crate::error::{CallError, Error};
use crate::sys::locate::{provider_of, Component};
use crate::version::Version;

/// The number of the compile workers' protocol, which a compile server's greeting states: changed
/// with any change to the greeting, the frames or the messages.
pub const PROTOCOL: u32 = 4;

/// The first word of the server's greeting.
pub(super) const GREETING: &str = "cudyn-compile-server";

/// The largest message accepted: a cubin of a huge program is tens of MB.
const MAX_FRAME: usize = 1 << 30;

/// Writes `message` as one frame (its length, the message, its checksum) and flushes.
pub(super) fn write_frame(to: &mut impl Write, message: &[u8]) -> io::Result<()> {
    let length = u32::try_from(message.len())
        .ok()
        .filter(|&length| length as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message too long"))?;
    to.write_all(&length.to_le_bytes())?;
    to.write_all(message)?;
    to.write_all(&codec::checksum(message))?;
    to.flush()
}

/// Reads one frame and checks its checksum; `None` at a clean end of the stream.
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
    let mut sealed = vec![0; length + codec::CHECKSUM];
    from.read_exact(&mut sealed)?;
    if codec::unsealed(&sealed).is_none() {
        return Err(damaged(
            "a frame's checksum does not match its bytes".into(),
        ));
    }
    sealed.truncate(length);
    Ok(Some(sealed))
}

fn damaged(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// A message of kind `tag` being written.
pub(super) fn message(tag: u8) -> Writer {
    Writer(vec![tag])
}

/// A reader of `message`'s fields, when it is of kind `tag`.
pub(super) fn tagged(message: &[u8], tag: u8) -> Result<Reader<'_>, Malformed> {
    let mut reader = Reader(message);
    match reader.u8()? {
        found if found == tag => Ok(reader),
        _ => Err(Malformed::Unknown("message tag")),
    }
}

/// The protocol's own fields, on [`crate::codec`]'s.
pub(super) trait Fields {
    fn texts<S: AsRef<str>>(&mut self, texts: &[S]) -> &mut Self;
    fn paths(&mut self, paths: &[PathBuf]) -> &mut Self;
    fn pairs(&mut self, pairs: &[(String, String)]) -> &mut Self;
    /// An option that may be left unset.
    fn flag(&mut self, value: Option<bool>) -> &mut Self;
    fn output(&mut self, output: Output) -> &mut Self;
}

impl Fields for Writer {
    fn texts<S: AsRef<str>>(&mut self, texts: &[S]) -> &mut Self {
        self.list(texts, |writer, text| {
            writer.text(text.as_ref());
        })
    }

    fn paths(&mut self, paths: &[PathBuf]) -> &mut Self {
        self.list(paths, |writer, path| {
            writer.path(path);
        })
    }

    fn pairs(&mut self, pairs: &[(String, String)]) -> &mut Self {
        self.list(pairs, |writer, (first, second)| {
            writer.text(first).text(second);
        })
    }

    fn flag(&mut self, value: Option<bool>) -> &mut Self {
        self.optional(value, |writer, value| {
            writer.bool(value);
        })
    }

    fn output(&mut self, output: Output) -> &mut Self {
        let number = OUTPUTS.iter().position(|&known| known == output);
        self.u8(number.unwrap_or(0) as u8)
    }
}

fn read_flag(reader: &mut Reader) -> Result<Option<bool>, Malformed> {
    reader.optional(Reader::bool)
}

fn read_pairs(reader: &mut Reader) -> Result<Vec<(String, String)>, Malformed> {
    reader.list(|reader| Ok((reader.text()?, reader.text()?)))
}

fn read_arch(reader: &mut Reader) -> Result<Arch, Malformed> {
    reader
        .str()?
        .parse()
        .map_err(|_| Malformed::Unknown("architecture"))
}

pub(super) fn read_output(reader: &mut Reader) -> Result<Output, Malformed> {
    OUTPUTS
        .get(usize::from(reader.u8()?))
        .copied()
        .ok_or(Malformed::Unknown("output"))
}

const OUTPUTS: [Output; 3] = [Output::Cubin, Output::Ptx, Output::LtoIr];
const STANDARDS: [CppStandard; 4] = [
    CppStandard::Cpp11,
    CppStandard::Cpp14,
    CppStandard::Cpp17,
    CppStandard::Cpp20,
];

/// Message tags.
pub(super) const START: u8 = 1;
pub(super) const READY: u8 = 2;
pub(super) const JOB: u8 = 3;
pub(super) const OUTCOME: u8 = 4;
pub(super) const LINK: u8 = 5;
pub(super) const LINKED: u8 = 6;

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
        let mut writer = message(START);
        writer
            .u64(self.workers)
            .optional(self.library_path.as_deref(), |writer, folders| {
                writer.paths(folders);
            })
            .u64(self.job_time_limit.as_millis() as u64);
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, START)?;
        let start = Start {
            workers: reader.u64()?,
            library_path: reader.optional(|reader| reader.list(Reader::path))?,
            job_time_limit: Duration::from_millis(reader.u64()?),
        };
        reader.end()?;
        Ok(start)
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
        let mut writer = message(READY);
        match &self.nvrtc {
            Ok(nvrtc) => {
                let since = nvrtc
                    .modified
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                writer
                    .bool(true)
                    .path(&nvrtc.path)
                    .u64(nvrtc.size)
                    .u64(since.as_secs())
                    .u64(u64::from(since.subsec_nanos()))
                    .u64(u64::from(nvrtc.version.major))
                    .u64(u64::from(nvrtc.version.minor))
            }
            Err(reason) => writer.bool(false).text(reason),
        };
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, READY)?;
        let nvrtc = match reader.bool()? {
            true => {
                let path = reader.path()?;
                let size = reader.u64()?;
                let (seconds, nanos) = (reader.u64()?, reader.u64()?);
                let nanos = u32::try_from(nanos)
                    .ok()
                    .filter(|&nanos| nanos < 1_000_000_000)
                    .ok_or(Malformed::Unknown("time"))?;
                let modified = SystemTime::UNIX_EPOCH
                    .checked_add(Duration::new(seconds, nanos))
                    .ok_or(Malformed::Unknown("time"))?;
                let mut part =
                    || u32::try_from(reader.u64()?).map_err(|_| Malformed::Unknown("version"));
                let version = Version::new(part()?, part()?);
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
        let mut writer = message(JOB);
        writer
            .u64(self.id)
            .text(&self.arch.sm())
            .paths(&self.defaults)
            .path(&self.folder)
            .text(&program.source)
            .text(&program.name)
            .output(program.output)
            .u8(match program.standard {
                None => 0,
                Some(standard) => {
                    1 + STANDARDS.iter().position(|&s| s == standard).unwrap_or(0) as u8
                }
            })
            .list(&program.defines, |writer, (name, value)| {
                writer
                    .text(name)
                    .optional(value.as_deref(), |writer, value| {
                        writer.text(value);
                    });
            })
            .paths(&program.include_folders)
            .bool(program.default_includes)
            .pairs(&program.headers)
            .bool(program.fast_math)
            .flag(program.ftz)
            .flag(program.prec_div)
            .flag(program.prec_sqrt)
            .flag(program.fmad)
            .bool(program.debug)
            .bool(program.line_info)
            .bool(program.relocatable)
            .texts(&program.extra)
            .texts(&program.name_expressions)
            .bool(program.allow_newer_ptx);
        writer.0
    }

    pub(super) fn decode(message: &[u8]) -> Result<Self, Malformed> {
        let mut reader = tagged(message, JOB)?;
        let id = reader.u64()?;
        let arch = read_arch(&mut reader)?;
        let defaults = reader.list(Reader::path)?;
        let folder = reader.path()?;
        let mut program = Program::new(reader.text()?).name(reader.text()?);
        program.arch = Some(arch);
        program.output = read_output(&mut reader)?;
        program.standard = match reader.u8()? {
            0 => None,
            n => Some(
                *STANDARDS
                    .get(usize::from(n - 1))
                    .ok_or(Malformed::Unknown("C++ standard"))?,
            ),
        };
        program.defines =
            reader.list(|reader| Ok((reader.text()?, reader.optional(Reader::text)?)))?;
        program.include_folders = reader.list(Reader::path)?;
        program.default_includes = reader.bool()?;
        program.headers = read_pairs(&mut reader)?;
        program.fast_math = reader.bool()?;
        program.ftz = read_flag(&mut reader)?;
        program.prec_div = read_flag(&mut reader)?;
        program.prec_sqrt = read_flag(&mut reader)?;
        program.fmad = read_flag(&mut reader)?;
        program.debug = reader.bool()?;
        program.line_info = reader.bool()?;
        program.relocatable = reader.bool()?;
        program.extra = reader.list(Reader::text)?;
        program.name_expressions = reader.list(Reader::text)?;
        program.allow_newer_ptx = reader.bool()?;
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

/// A failed call of a CUDA library, as a message's fields: the call, its status, its name and
/// text, the log and the hint.
pub(super) fn write_call(writer: &mut Writer, call: &CallError) {
    writer
        .text(call.call)
        .u64(call.code as u32 as u64)
        .text(&call.name)
        .text(&call.message)
        .optional(call.log.as_deref(), |writer, log| {
            writer.text(log);
        })
        .optional(call.hint.as_deref(), |writer, hint| {
            writer.text(hint);
        });
}

/// What [`write_call`] wrote, for a call of `api` among `calls` (the names travel as text, and
/// the error keeps them as `&'static str`).
pub(super) fn read_call(
    reader: &mut Reader,
    api: Component,
    calls: &[&'static str],
) -> Result<Error, Malformed> {
    let call = reader.str()?;
    let call = calls
        .iter()
        .find(|known| **known == call)
        .ok_or(Malformed::Unknown("call"))?;
    Ok(Error::Cuda(Box::new(CallError {
        api,
        call,
        code: reader.u64()? as u32 as i32,
        name: reader.text()?,
        message: reader.text()?,
        log: reader.optional(Reader::text)?,
        hint: reader.optional(Reader::text)?,
    })))
}

/// A job's outcome as a message.
pub(super) fn encode_outcome(id: u64, outcome: &Outcome) -> Vec<u8> {
    let mut writer = message(OUTCOME);
    writer.u64(id);
    match outcome {
        Outcome::Compiled(compiled) => {
            writer
                .u8(0)
                .text(&compiled.name)
                .output(compiled.output)
                .text(&compiled.arch.sm())
                .bytes(&compiled.code)
                .text(&compiled.log)
                .pairs(&compiled.lowered_names);
        }
        Outcome::Failed(Error::Cuda(call))
            if call.api == Component::Nvrtc && NVRTC_CALLS.contains(&call.call) =>
        {
            write_call(writer.u8(1), call);
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
            output: read_output(&mut reader)?,
            arch: read_arch(&mut reader)?,
            code: reader.bytes()?.to_vec().into(),
            log: reader.text()?,
            lowered_names: read_pairs(&mut reader)?,
            checked: None,
            cache_use: CacheUse::Off,
        }),
        1 => Outcome::Failed(read_call(&mut reader, Component::Nvrtc, &NVRTC_CALLS)?),
        2 => {
            let header = reader.text()?;
            Outcome::Failed(Error::HeaderNotFound {
                provider: provider_of(&header),
                header,
                searched: reader.list(Reader::text)?,
                log: reader.text()?,
            })
        }
        3 => Outcome::FailedOtherwise(reader.text()?),
        4 => Outcome::Lost(reader.text()?),
        _ => return Err(Malformed::Unknown("outcome")),
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

    fn job() -> Job {
        Job {
            id: 7,
            arch: Arch::new(9, 0),
            defaults: vec![PathBuf::from("/cuda/include")],
            folder: PathBuf::from("/home/me/project"),
            program: every_option(),
        }
    }

    #[test]
    fn a_job_carries_every_input_of_a_compile() {
        let job = job();
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
    fn every_cut_or_extended_message_is_refused_and_says_why() {
        let job = job().encode();
        for len in 0..job.len() {
            assert!(Job::decode(&job[..len]).is_err(), "cut to {len}");
        }
        let mut longer = job.clone();
        longer.push(0);
        assert_eq!(Job::decode(&longer), Err(Malformed::Trailing));
        assert_eq!(
            Ready::decode(&job).unwrap_err().to_string(),
            "it holds an unknown message tag"
        );
        let lost = encode_outcome(1, &Outcome::Lost("gone".into()));
        let mut unknown = lost.clone();
        unknown[9] = 9;
        assert_eq!(
            decode_outcome(&unknown).unwrap_err(),
            Malformed::Unknown("outcome")
        );
        for len in 0..lost.len() {
            assert!(decode_outcome(&lost[..len]).is_err(), "cut to {len}");
        }
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
        for len in 1..bytes.len() {
            assert!(read_frame(&mut &bytes[..len]).is_err(), "cut to {len}");
        }
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(read_frame(&mut &damaged[..]).is_err(), "bit {bit}");
        }
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
