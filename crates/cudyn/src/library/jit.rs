//! The JIT compiler's part in a load: its options, the option arrays and log buffers a load
//! call is given, and what the JIT said.

use std::ffi::c_void;

use crate::builder::setters;
use crate::error::{Error, Result};
use crate::image::ImageKind;
use crate::sys::driver;

/// Options for the JIT compiler, used when the library holds PTX that must be compiled for the
/// device (a cubin or a fatbin with SASS for the device is not compiled again).
///
/// Built from the default with its setters, so that a later JIT option is not a breaking change:
///
/// ```no_run
/// use cudyn::{JitOptions, Library};
///
/// let jit = JitOptions::default().max_registers(32).line_info(true).verbose_log(true);
/// let library = Library::loader().jit(jit).load(&std::fs::read("kernels.ptx")?)?;
/// println!("{}", library.jit_log().info);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JitOptions {
    /// Optimization level, 0 to 4 (the JIT's default is 4).
    pub optimization_level: Option<u32>,
    /// Most registers a thread may use.
    pub max_registers: Option<u32>,
    /// Generate debug information.
    pub debug_info: bool,
    /// Generate line-number information.
    pub line_info: bool,
    /// Make the info log verbose.
    pub verbose_log: bool,
    /// Capacity of each of the two logs (info and error), in bytes.
    pub log_capacity: usize,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            optimization_level: None,
            max_registers: None,
            debug_info: false,
            line_info: false,
            verbose_log: false,
            log_capacity: 16 * 1024,
        }
    }
}

impl JitOptions {
    setters! {
        /// The optimization level, 0 to 4 (the JIT's default is 4).
        optimization_level(level: u32) => Some;

        /// The most registers a thread may use.
        max_registers(count: u32) => Some;

        /// Debug information.
        debug_info(on: bool);

        /// Line-number information.
        line_info(on: bool);

        /// A verbose info log.
        verbose_log(on: bool);

        /// The capacity of each of the two logs (info and error), in bytes.
        log_capacity(bytes: usize);
    }
}

/// What the JIT compiler said while loading a library; empty for code that needed no JIT, and for
/// a fatbin the driver loads lazily (its default), whose PTX, when the device needs it, is
/// compiled at the fatbin's first use in a context, after the load (with
/// `CUDA_MODULE_LOADING=EAGER` the load compiles it and keeps the log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JitLog {
    /// The informational log.
    pub info: String,
    /// The error log. It can hold an error even when the load succeeded.
    pub error: String,
}

impl JitLog {
    /// Whether both logs are empty.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty() && self.error.is_empty()
    }

    /// Both logs as one text for an error message, `None` when both are empty.
    pub fn text(&self) -> Option<String> {
        let parts: Vec<String> = [("error", &self.error), ("info", &self.info)]
            .into_iter()
            .filter(|(_, log)| !log.is_empty())
            .map(|(kind, log)| format!("JIT {kind} log: {}", log.trim_end()))
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }

    /// `error` with the logs attached, when it is a failed CUDA call without a log of its own.
    pub(crate) fn attach(&self, error: Error) -> Error {
        match error {
            Error::Cuda(mut call) if call.log.is_none() => {
                call.log = self.text();
                Error::Cuda(call)
            }
            other => other,
        }
    }
}

/// The JIT option arrays of one load, with the log buffers they point into.
#[derive(Debug)]
pub(super) struct JitArgs {
    options: [driver::CUjit_option; JitArgs::MAX],
    values: [*mut c_void; JitArgs::MAX],
    count: usize,
    /// The buffers the JIT writes its logs into; empty when the load is given none.
    pub(super) info: Vec<u8>,
    pub(super) error: Vec<u8>,
}

impl JitArgs {
    const MAX: usize = 9;
    const INFO_SIZE_SLOT: usize = 1;
    const ERROR_SIZE_SLOT: usize = 3;

    /// The JIT options of a load of `kind`, with log buffers as `logs` says. A cubin is never
    /// JIT-compiled: it gets no options and no log buffers, whose first touch costs a new
    /// process page faults on every load.
    pub(super) fn new(jit: &JitOptions, kind: ImageKind, logs: Logs) -> Result<JitArgs> {
        if let Some(level) = jit.optimization_level.filter(|&level| level > 4) {
            return Err(Error::JitOptimizationLevel { level });
        }
        let mut args = JitArgs {
            options: [0; Self::MAX],
            values: [std::ptr::null_mut(); Self::MAX],
            count: 0,
            info: Vec::new(),
            error: Vec::new(),
        };
        if kind == ImageKind::Cubin {
            return Ok(args);
        }
        let with_logs = match logs {
            Logs::Always => true,
            Logs::WhenTheJitMayRun => {
                kind == ImageKind::Ptx || jit.verbose_log || eager_module_loading()
            }
        };
        if with_logs {
            let capacity = jit.log_capacity.clamp(1, u32::MAX as usize);
            args.info = log_buffer(capacity);
            args.error = log_buffer(capacity);
            let info = args.info.as_mut_ptr().cast();
            let error = args.error.as_mut_ptr().cast();
            // The size slots are read back after the load: keep them at the indices named above.
            args.push(driver::CU_JIT_INFO_LOG_BUFFER, info);
            args.push(driver::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, capacity as _);
            args.push(driver::CU_JIT_ERROR_LOG_BUFFER, error);
            args.push(driver::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, capacity as _);
        }
        if let Some(level) = jit.optimization_level {
            args.push(driver::CU_JIT_OPTIMIZATION_LEVEL, level as _);
        }
        if let Some(registers) = jit.max_registers {
            args.push(driver::CU_JIT_MAX_REGISTERS, registers as _);
        }
        for (set, option) in [
            (jit.debug_info, driver::CU_JIT_GENERATE_DEBUG_INFO),
            (jit.line_info, driver::CU_JIT_GENERATE_LINE_INFO),
            (jit.verbose_log, driver::CU_JIT_LOG_VERBOSE),
        ] {
            if set {
                args.push(option, 1 as _);
            }
        }
        Ok(args)
    }

    /// Adds an option; scalar values travel in the pointer itself, as the JIT API specifies.
    fn push(&mut self, option: driver::CUjit_option, value: *mut c_void) {
        self.options[self.count] = option;
        self.values[self.count] = value;
        self.count += 1;
    }

    /// The options set and their values, for the load call.
    pub(super) fn arrays(&mut self) -> (&mut [driver::CUjit_option], &mut [*mut c_void]) {
        (
            &mut self.options[..self.count],
            &mut self.values[..self.count],
        )
    }

    /// Whether the load is given log buffers.
    pub(super) fn has_logs(&self) -> bool {
        self.info.capacity() != 0
    }

    pub(super) fn logs(&self) -> JitLog {
        if !self.has_logs() {
            return JitLog::default();
        }
        JitLog {
            info: read_log(&self.info, self.values[Self::INFO_SIZE_SLOT]),
            error: read_log(&self.error, self.values[Self::ERROR_SIZE_SLOT]),
        }
    }
}

/// When a load that may JIT-compile gets the JIT's log buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Logs {
    /// When the JIT may run during the load: for PTX, which cudyn loads into the current
    /// context at once; for a fatbin, only when the driver loads modules eagerly or a verbose
    /// log is asked for. A fatbin is otherwise loaded into a context at its first use, after
    /// the load has returned, so buffers given to the load would stay empty; and the driver
    /// takes longer over a load that is given them (about 0.4 µs of a 9 µs load on an H200).
    WhenTheJitMayRun,
    /// Always: to learn why a load without them failed.
    Always,
}

/// Whether the driver loads every module into the context at once rather than at its first
/// use: `CUDA_MODULE_LOADING=EAGER`, which it reads when it is initialized (lazy loading is its
/// default since CUDA 12.2).
fn eager_module_loading() -> bool {
    static EAGER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *EAGER.get_or_init(|| {
        std::env::var_os("CUDA_MODULE_LOADING")
            .is_some_and(|mode| mode.eq_ignore_ascii_case("EAGER"))
    })
}

/// A log buffer of `capacity` bytes for the JIT to write into (its spare capacity): not zeroed,
/// since a load's log is a few lines at most and zeroing two buffers of the default 16 KiB cost
/// every PTX or fatbin load more than their use; its first byte a NUL, so that a log the JIT
/// leaves unwritten reads as empty.
fn log_buffer(capacity: usize) -> Vec<u8> {
    let mut buffer = Vec::with_capacity(capacity);
    buffer.push(0);
    buffer
}

/// The text in a log buffer made by [`log_buffer`]: up to the size the JIT reports filled, the
/// first NUL, or the end.
fn read_log(buffer: &Vec<u8>, filled: *mut c_void) -> String {
    let limit = (filled as usize).min(buffer.capacity());
    let start = buffer.as_ptr();
    let mut end = 0;
    while end < limit {
        // SAFETY: `start` points to `capacity` bytes of one allocation, and `end < limit <=
        // capacity`. The bytes read are those before the first NUL from the start: the NUL put
        // first by `log_buffer`, or the log the JIT wrote over it, a C string it ends with a NUL
        // within the buffer (the size it is given includes the terminator) and whose length it
        // reports in `filled`, the limit here. So no byte the JIT did not write is read.
        let byte = unsafe { start.add(end).read() };
        if byte == 0 {
            break;
        }
        end += 1;
    }
    // SAFETY: the `end` bytes from `start` were read just above: written, none a NUL.
    let text = unsafe { std::slice::from_raw_parts(start, end) };
    String::from_utf8_lossy(text).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{self, runtime};

    #[test]
    fn jit_options_fill_the_arrays_the_header_describes() {
        let jit = JitOptions {
            optimization_level: Some(2),
            max_registers: Some(40),
            line_info: true,
            log_capacity: 128,
            ..JitOptions::default()
        };
        let args = JitArgs::new(&jit, ImageKind::Ptx, Logs::WhenTheJitMayRun).unwrap();
        let options = &args.options[..args.count];
        assert_eq!(
            options,
            [
                driver::CU_JIT_INFO_LOG_BUFFER,
                driver::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                driver::CU_JIT_ERROR_LOG_BUFFER,
                driver::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                driver::CU_JIT_OPTIMIZATION_LEVEL,
                driver::CU_JIT_MAX_REGISTERS,
                driver::CU_JIT_GENERATE_LINE_INFO,
            ]
        );
        assert_eq!(args.values[0], args.info.as_ptr() as *mut c_void);
        assert_eq!(args.values[1] as usize, 128);
        assert_eq!(args.values[2], args.error.as_ptr() as *mut c_void);
        assert_eq!(args.values[4] as usize, 2);
        assert_eq!(args.values[5] as usize, 40);
        assert_eq!(args.values[6] as usize, 1);
        // A cubin is never JIT-compiled: no options, no buffers, an empty log.
        let cubin = JitArgs::new(&jit, ImageKind::Cubin, Logs::Always).unwrap();
        assert_eq!(
            (cubin.count, cubin.info.len(), cubin.error.len()),
            (0, 0, 0)
        );
        assert_eq!(cubin.logs(), JitLog::default());
        // A fatbin, loaded into a context at its first use, gets the JIT's options without log
        // buffers, unless the driver loads eagerly, a verbose log is asked for, or a failed load
        // is repeated to learn why.
        let lazy = JitArgs::new(&jit, ImageKind::Fatbin, Logs::WhenTheJitMayRun).unwrap();
        if !eager_module_loading() {
            assert_eq!(
                &lazy.options[..lazy.count],
                [
                    driver::CU_JIT_OPTIMIZATION_LEVEL,
                    driver::CU_JIT_MAX_REGISTERS,
                    driver::CU_JIT_GENERATE_LINE_INFO,
                ]
            );
            assert!(!lazy.has_logs());
            assert_eq!(lazy.logs(), JitLog::default());
        }
        let verbose = JitOptions {
            verbose_log: true,
            ..jit.clone()
        };
        for (jit, logs) in [(&jit, Logs::Always), (&verbose, Logs::WhenTheJitMayRun)] {
            let fatbin = JitArgs::new(jit, ImageKind::Fatbin, logs).unwrap();
            assert!(fatbin.has_logs());
            assert_eq!(fatbin.options[..4], args.options[..4]);
        }
        // The runtime's option numbers are the driver's.
        assert_eq!(
            runtime::cudaJitOptimizationLevel,
            driver::CU_JIT_OPTIMIZATION_LEVEL
        );
        assert_eq!(
            runtime::cudaJitErrorLogBuffer,
            driver::CU_JIT_ERROR_LOG_BUFFER
        );
        assert_eq!(
            runtime::cudaJitGenerateLineInfo,
            driver::CU_JIT_GENERATE_LINE_INFO
        );
    }

    #[test]
    fn out_of_range_optimization_level_is_refused() {
        let jit = JitOptions {
            optimization_level: Some(5),
            ..JitOptions::default()
        };
        for kind in [ImageKind::Ptx, ImageKind::Cubin, ImageKind::Fatbin] {
            assert!(matches!(
                JitArgs::new(&jit, kind, Logs::Always),
                Err(Error::JitOptimizationLevel { level: 5 })
            ));
        }
    }

    #[test]
    fn logs_stop_at_the_filled_size_or_the_first_nul() {
        let mut buffer = log_buffer(64);
        assert_eq!(buffer.capacity(), 64);
        // Unwritten, with the size the JIT was given still in the filled slot.
        assert_eq!(read_log(&buffer, 64 as *mut c_void), "");
        // The JIT writes its log over the buffer's spare capacity.
        buffer.clear();
        buffer.extend_from_slice(b"ptxas error   : Unsupported .version 9.5\0garbage");
        assert_eq!(
            read_log(&buffer, 44 as *mut c_void),
            "ptxas error   : Unsupported .version 9.5"
        );
        assert_eq!(
            read_log(&buffer, 64 as *mut c_void),
            "ptxas error   : Unsupported .version 9.5"
        );
        assert_eq!(read_log(&buffer, 5 as *mut c_void), "ptxas");
        // A cubin's load has no buffers.
        assert_eq!(read_log(&Vec::new(), 100 as *mut c_void), "");
    }

    #[test]
    fn logs_are_attached_to_call_errors_without_one() {
        let log = JitLog {
            info: String::new(),
            error: "ptxas fatal: Unsupported .version 9.5".into(),
        };
        let error = Error::Cuda(Box::new(crate::error::CallError {
            api: sys::locate::Component::Runtime,
            call: "cudaLibraryGetKernel",
            code: 222,
            name: "cudaErrorUnsupportedPtxVersion".into(),
            message: "the provided PTX was compiled with an unsupported toolchain".into(),
            log: None,
            hint: None,
        }));
        let error = log.attach(error);
        assert_eq!(
            error.log(),
            Some("JIT error log: ptxas fatal: Unsupported .version 9.5")
        );
        assert!(error.to_string().contains("Unsupported .version 9.5"));
    }
}
