//! The DPDK environment abstraction layer, initialised once per process.

use std::ffi::{CString, c_char, c_int};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::{Error, sys};

/// `argv[0]` handed to `rte_eal_init` before the caller's options.
const PROGRAM: &str = "dp-dpdk";

/// The outcome of the one `rte_eal_init` of this process (DPDK cannot initialise EAL
/// twice, nor retry after a failure), with the arguments it was called with.
static EAL: Mutex<Option<Outcome>> = Mutex::new(None);

/// The arguments of the one `rte_eal_init` call and what it returned.
type Outcome = (Vec<String>, Result<&'static Eal, Error>);

/// Proof that EAL is initialised: every DPDK object of this crate is made from an
/// `&'static Eal`, so no DPDK call can happen before [`Eal::init`] succeeded.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
}

impl Eal {
    /// Initialise EAL with `args` (options only, no program name: e.g. `["--no-huge",
    /// "--no-pci", "-m", "256"]`), once per process.
    ///
    /// A second call with the same arguments returns the same `Eal`; with different
    /// arguments it fails with [`Error::EalAlreadyInitialised`]. If the first call
    /// failed, every later call returns that failure (EAL cannot be retried).
    ///
    /// The calling thread becomes EAL's main lcore thread (EAL sets its CPU affinity to
    /// the main lcore's CPUs: use `--lcores` with [`free_main_lcore`] to leave it free
    /// to move).
    pub fn init<I, S>(args: I) -> Result<&'static Eal, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|s| s.as_ref().to_owned()).collect();
        let mut slot = EAL.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((first, result)) = slot.as_ref() {
            return if *first == args {
                result.clone()
            } else {
                Err(Error::EalAlreadyInitialised {
                    args: first.clone(),
                })
            };
        }
        let result = Self::init_once(&args);
        *slot = Some((args, result.clone()));
        result
    }

    /// The initialised EAL, if [`Eal::init`] succeeded in this process.
    pub fn get() -> Option<&'static Eal> {
        let slot = EAL.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_ref().and_then(|(_, r)| r.as_ref().ok().copied())
    }

    fn init_once(args: &[String]) -> Result<&'static Eal, Error> {
        let mut owned = Vec::with_capacity(args.len() + 1);
        for a in std::iter::once(PROGRAM).chain(args.iter().map(String::as_str)) {
            owned.push(CString::new(a).map_err(|_| {
                Error::InvalidArgument(format!("EAL argument {a:?} contains a NUL byte"))
            })?);
        }
        // EAL permutes argv and may keep pointers into it for the life of the process,
        // so the strings and the array are leaked (once per process).
        let strings: &'static [CString] = Vec::leak(owned);
        let argv: &'static mut [*mut c_char] = Vec::leak(
            strings
                .iter()
                .map(|s| s.as_ptr().cast_mut())
                .chain(std::iter::once(std::ptr::null_mut()))
                .collect(),
        );
        let argc = c_int::try_from(strings.len())
            .map_err(|_| Error::InvalidArgument("too many EAL arguments".into()))?;
        // SAFETY: argv holds argc valid NUL-terminated strings followed by NULL, all
        // leaked so they outlive EAL; this runs at most once per process (the mutex and
        // the stored outcome above guarantee it).
        let ret = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            return Err(Error::rte_errno("rte_eal_init"));
        }
        Ok(Box::leak(Box::new(Eal {
            args: args.to_vec(),
        })))
    }

    /// The arguments EAL was initialised with (without the program name).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The number of lcores EAL runs (`rte_lcore_count`).
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: EAL is initialised (self exists); the call only reads its config.
        unsafe { sys::rte_lcore_count() }
    }

    /// The calling thread's lcore id, or `None` on a thread EAL does not know (see
    /// [`Eal::register_thread`]).
    pub fn lcore_id(&self) -> Option<u32> {
        // SAFETY: reads a thread-local variable of EAL, which is initialised.
        let (id, any) = unsafe { (sys::shim_lcore_id(), sys::shim_lcore_id_any()) };
        (id != any).then_some(id)
    }

    /// Make the calling thread an EAL (non-EAL-created) lcore, so it gets an lcore id
    /// and mempool caches (`rte_thread_register`); a thread that drives a
    /// [`DpdkLink`](crate::DpdkLink) at high rates should. Registering twice is a
    /// no-op.
    pub fn register_thread(&self) -> Result<u32, Error> {
        if let Some(id) = self.lcore_id() {
            return Ok(id);
        }
        // SAFETY: EAL is initialised; registers the calling thread only.
        let ret = unsafe { sys::rte_thread_register() };
        if ret < 0 {
            return Err(Error::rte_errno("rte_thread_register"));
        }
        self.lcore_id()
            .ok_or_else(|| Error::dpdk("rte_thread_register", libc_enotsup()))
    }
}

/// ENOTSUP (95 on Linux), without a libc dependency for one constant.
const fn libc_enotsup() -> i32 {
    95
}

/// EAL options for virtual devices on an ordinary Linux host: no hugepages, no PCI
/// scan, no shared runtime files, no telemetry socket, `memory_mb` of anonymous memory
/// and a `--file-prefix` unique to the process, main lcore 0 free to run on any CPU.
/// Append `--vdev` options (or open ports with [`PortConfig::vdev`](crate::PortConfig::vdev)).
pub fn virtual_device_args(memory_mb: u32) -> Vec<String> {
    vec![
        "--no-huge".into(),
        "--no-pci".into(),
        "--no-shconf".into(),
        "--no-telemetry".into(),
        "-m".into(),
        memory_mb.to_string(),
        "--file-prefix".into(),
        unique_file_prefix(),
        "--lcores".into(),
        free_main_lcore(),
        "--log-level".into(),
        "lib.eal:warning".into(),
    ]
}

/// The `--lcores` value that leaves EAL's main lcore (the calling thread) free to run
/// on every CPU the calling thread may use: `0@(<list>)` with the kernel's list of
/// them (`Cpus_allowed_list` of /proc/thread-self/status, e.g. `1,3-5` under
/// `taskset`), else `0@(0-N)` over `available_parallelism`. Not `0-N` alone: under
/// `taskset -c 1` that named CPU 0, outside the set.
pub fn free_main_lcore() -> String {
    let allowed = std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|l| l.trim().to_owned())
        })
        .filter(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_digit() || b == b',' || b == b'-')
        });
    match allowed {
        Some(list) => format!("0@({list})"),
        None => {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            format!("0@(0-{})", cpus.saturating_sub(1))
        }
    }
}

/// `ofi-nostd-<pid>-<nanoseconds>`: a `--file-prefix` no other process uses; the same
/// string for every call within one process (so [`virtual_device_args`] is too).
pub fn unique_file_prefix() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            format!("ofi-nostd-{}-{nanos}", std::process::id())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    /// The list names exactly the CPUs this thread may run on (as many as
    /// `available_parallelism` counts), whatever the host's count.
    #[test]
    fn the_main_lcore_may_run_on_every_cpu_this_thread_may() {
        let v = super::free_main_lcore();
        let list = v
            .strip_prefix("0@(")
            .and_then(|l| l.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{v}"));
        let mut n = 0;
        for part in list.split(',') {
            n += match part.split_once('-') {
                Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
                None => {
                    part.parse::<usize>().unwrap();
                    1
                }
            };
        }
        assert_eq!(
            n,
            std::thread::available_parallelism().unwrap().get(),
            "{v}"
        );
    }
}
