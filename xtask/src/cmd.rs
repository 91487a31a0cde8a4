//! Running external programs with clear errors, and small filesystem helpers.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The error of every xtask operation: one line a human can act on.
pub type Result<T = ()> = std::result::Result<T, String>;

/// Builds a `cargo` command (the rustup proxy on `PATH`, so `+toolchain` works).
pub fn cargo<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("cargo");
    cmd.args(args);
    cmd
}

/// Renders a command the way a user would type it, environment overrides first.
pub fn display(cmd: &Command) -> String {
    let mut s = String::new();
    for (key, value) in cmd.get_envs() {
        if let Some(value) = value {
            let _ = write!(s, "{}={} ", key.to_string_lossy(), value.to_string_lossy());
        }
    }
    s.push_str(&cmd.get_program().to_string_lossy());
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs a command with inherited stdio, failing unless it exits successfully.
pub fn run(cmd: &mut Command) -> Result {
    let shown = display(cmd);
    println!("    $ {shown}");
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{shown}` failed ({status})"))
    }
}

/// Runs a command and returns its stdout; stderr is passed through on failure only.
pub fn output(cmd: &mut Command) -> Result<String> {
    let shown = display(cmd);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        Err(format!("`{shown}` failed ({})", out.status))
    }
}

/// True when the command starts and exits successfully; all output is discarded.
pub fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// True when `name` is an executable file in one of the directories of `PATH`.
pub fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// True when the process runs as root (the owner of `/proc/self` is our effective uid).
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The files directly inside `dir` whose name ends with `suffix`, sorted; none if `dir` is absent.
pub fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_shows_env_then_program_and_args() {
        let mut cmd = cargo(["doc", "--workspace"]);
        cmd.env("RUSTDOCFLAGS", "-D warnings");
        assert_eq!(
            display(&cmd),
            "RUSTDOCFLAGS=-D warnings cargo doc --workspace"
        );
    }

    #[test]
    fn probes_tell_present_from_absent() {
        assert!(on_path("sh"));
        assert!(!on_path("definitely-not-a-command-xtask"));
        assert!(succeeds(&mut Command::new("true")));
        assert!(!succeeds(&mut Command::new(
            "definitely-not-a-command-xtask"
        )));
    }
}
