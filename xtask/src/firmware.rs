//! `cargo xtask firmware`: the DPU image for `aarch64-unknown-none`, its size report,
//! and booting it under QEMU with virtio-net on a host TAP device.
//!
//! * `cargo xtask firmware` builds the image (profile `firmware`) and prints its code size
//!   (`.text` and `.rodata`) against the 256 KiB target and its static RAM (`.data` and
//!   `.bss`, and the stack), read from the ELF's section headers.
//! * `cargo xtask firmware --run` also boots it: `qemu-system-aarch64 -M virt` with a
//!   virtio-net device on TAP `fwtap<N>`, host address `10.213.<N>.1/24`, the image at
//!   `10.213.<N>.2` (QEMU's `mac=02:00:0a:d5:<N>:02` tells it), its defmt log decoded
//!   live by `defmt-print`. Ctrl-C ends it.
//! * The firmware step of `cargo xtask test` (and `cargo xtask firmware --test`) boots
//!   it the same way, runs the host side (`firmware/tests/qemu.rs`, ignored in plain
//!   `cargo test`) against it: 2,000 DGRAM ping-pongs, then through `crates/hosted` over
//!   a UDP socket on the TAP's host address a few RDM msg ping-pongs and 10,000 RDM
//!   tagged ping-pongs of 1 B .. 64 KiB, every byte checked; and checks the decoded log
//!   shows both runs (the image's statistics lines count the echoes).
//!
//! The TAP and the device run with a 9000-byte MTU (QEMU's `host_mtu=9000`, which the
//! driver negotiates as VIRTIO_NET_F_MTU): a 64 KiB message is 8 packets, not 45, which
//! is what keeps the RDM run to a couple of minutes under TCG.
//!
//! The TAP device is created by QEMU itself (not persistent), so it disappears whenever
//! QEMU ends, and QEMU never outlives xtask: Ctrl-C reaches QEMU too, a guard kills QEMU
//! (and deletes the device should it linger) on every error path, and QEMU runs under
//! `setpriv --pdeathsig KILL` so even a signal to xtask alone takes it down. Nothing is
//! routed beyond the TAP's /24.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cmd::{self, Result};
use crate::ws::Workspace;

/// The rustup target of the image.
pub const TARGET: &str = "aarch64-unknown-none";

/// The cargo profile of the image (`Cargo.toml`: release with fat LTO and one codegen
/// unit).
pub const PROFILE: &str = "firmware";
/// The image's code budget (`.text` + `.rodata`).
pub const CODE_BUDGET: u64 = 256 * 1024;
/// DGRAM pings the test sends.
const TEST_PINGS: u32 = 2000;
/// RDM untagged pings the test sends (msg echo service).
const TEST_RDM_MSGS: u32 = 40;
/// RDM tagged pings the test sends (tagged echo service).
const TEST_RDM_PINGS: u32 = 10_000;
/// The MTU of the TAP and of the virtio-net device.
const MTU: u32 = 9000;

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace) or `target`.
fn target_dir(ws: &Workspace) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => ws.path(&dir.to_string_lossy()),
        None => ws.path("target"),
    }
}

/// Builds the image with the `firmware` profile (release with whole-program
/// optimisation; defmt level `info`, QEMU exit on panic); returns its path.
pub fn build(ws: &Workspace) -> Result<PathBuf> {
    crate::prereq::ensure_rustup_pieces(&[TARGET], &[])?;
    let mut build = ws.cargo([
        "build",
        "--profile",
        PROFILE,
        "-p",
        "firmware",
        "--bin",
        "firmware",
        "--features",
        "qemu-exit",
        "--target",
        TARGET,
    ]);
    build.env("DEFMT_LOG", "info");
    cmd::run(&mut build)?;
    Ok(target_dir(ws).join(TARGET).join(PROFILE).join("firmware"))
}

/// Section sizes of an ELF64 little-endian file, by name.
pub fn elf_sections(bytes: &[u8]) -> Result<Vec<(String, u64)>> {
    let rd = |off: usize, n: usize| -> Result<u64> {
        let b = bytes
            .get(off..off + n)
            .ok_or_else(|| format!("ELF truncated at {off}"))?;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(b);
        Ok(u64::from_le_bytes(v))
    };
    if bytes.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return Err("not a little-endian ELF64 file".into());
    }
    let shoff = rd(0x28, 8)? as usize;
    let shentsize = rd(0x3a, 2)? as usize;
    let shnum = rd(0x3c, 2)? as usize;
    let shstrndx = rd(0x3e, 2)? as usize;
    let strtab = rd(shoff + shstrndx * shentsize + 0x18, 8)? as usize;
    let mut out = Vec::new();
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        let name_off = strtab + rd(sh, 4)? as usize;
        let name_bytes = bytes.get(name_off..).unwrap_or_default();
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(0);
        let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
        out.push((name, rd(sh + 0x20, 8)?));
    }
    Ok(out)
}

/// Code and static RAM of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sizes {
    /// `.text`.
    pub text: u64,
    /// `.rodata`.
    pub rodata: u64,
    /// `.data`.
    pub data: u64,
    /// `.bss`.
    pub bss: u64,
    /// `.stack`.
    pub stack: u64,
}

impl Sizes {
    /// From the section table.
    pub fn of(sections: &[(String, u64)]) -> Self {
        let get = |n: &str| {
            sections
                .iter()
                .filter(|(name, _)| name == n)
                .map(|(_, s)| *s)
                .sum()
        };
        Sizes {
            text: get(".text"),
            rodata: get(".rodata"),
            data: get(".data"),
            bss: get(".bss"),
            stack: get(".stack"),
        }
    }

    /// `.text` + `.rodata`.
    pub fn code(&self) -> u64 {
        self.text + self.rodata
    }

    /// `.data` + `.bss`.
    pub fn static_ram(&self) -> u64 {
        self.data + self.bss
    }
}

fn kib(n: u64) -> String {
    format!("{:.1} KiB", n as f64 / 1024.0)
}

/// Prints the size report; fails when the code exceeds [`CODE_BUDGET`].
fn report(image: &Path) -> Result<Sizes> {
    let bytes =
        std::fs::read(image).map_err(|e| format!("cannot read {}: {e}", image.display()))?;
    let s = Sizes::of(&elf_sections(&bytes)?);
    println!("firmware image: {}", image.display());
    println!(
        "    code:       {} (.text {} + .rodata {}), target at most {}",
        kib(s.code()),
        kib(s.text),
        kib(s.rodata),
        kib(CODE_BUDGET)
    );
    println!(
        "    static RAM: {} (.data {} + .bss {}), plus a {} stack",
        kib(s.static_ram()),
        kib(s.data),
        kib(s.bss),
        kib(s.stack)
    );
    if s.code() > CODE_BUDGET {
        return Err(format!(
            "the image's code ({}) exceeds the {} target",
            kib(s.code()),
            kib(CODE_BUDGET)
        ));
    }
    Ok(s)
}

/// `cargo xtask firmware [--run]`.
pub fn run(ws: &Workspace, boot: bool) -> Result {
    let image = build(ws)?;
    report(&image)?;
    if !boot {
        return Ok(());
    }
    ensure_run_prerequisites()?;
    let net = TapNet::pick()?;
    println!(
        "booting under QEMU: TAP {} with host {}, image at {} (Ctrl-C ends it)",
        net.tap,
        net.host_ip(),
        net.fw_ip()
    );
    let mut vm = Vm::boot(&image, &net, true)?;
    let status = vm
        .qemu
        .wait()
        .map_err(|e| format!("waiting for QEMU: {e}"))?;
    vm.finish_log();
    if status.success() {
        Ok(())
    } else {
        Err(format!("QEMU ended with {status}"))
    }
}

/// The firmware step of `cargo xtask test`: boot, ping-pong from the host, check the log.
pub fn test(ws: &Workspace) -> Result {
    let image = build(ws)?;
    report(&image)?;
    ensure_run_prerequisites()?;
    // Build the host side before booting, so the VM's time is the test's.
    cmd::run(&mut ws.cargo(["test", "-p", "firmware", "--test", "qemu", "--no-run"]))?;
    let net = TapNet::pick()?;
    let mut vm = Vm::boot(&image, &net, false)?;
    vm.wait_for_line("ready:", Duration::from_secs(30))?;
    let mut host = ws.cargo([
        "test",
        "-p",
        "firmware",
        "--test",
        "qemu",
        "--",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    host.env("FIRMWARE_HOST_IP", net.host_ip())
        .env("FIRMWARE_FW_IP", net.fw_ip())
        .env("FIRMWARE_PINGS", TEST_PINGS.to_string())
        .env("FIRMWARE_RDM_MSGS", TEST_RDM_MSGS.to_string())
        .env("FIRMWARE_RDM_PINGS", TEST_RDM_PINGS.to_string());
    let started = Instant::now();
    let result = run_with_timeout(&mut host, Duration::from_secs(600));
    let took = started.elapsed();
    // The image reports its counters once a second while they change.
    let dgram = vm.wait_for(
        |l| {
            l.contains("dgram echo:")
                && echoed_in(l, "received,").is_some_and(|n| n >= u64::from(TEST_PINGS))
        },
        Duration::from_secs(5),
    );
    let rdm = vm.wait_for(
        |l| {
            echoed_in(l, "msg").is_some_and(|n| n >= u64::from(TEST_RDM_MSGS))
                && echoed_in(l, "tagged").is_some_and(|n| n >= u64::from(TEST_RDM_PINGS))
        },
        Duration::from_secs(5),
    );
    vm.stop();
    result?;
    let log = vm.log_path.display().to_string();
    let missing = |what: String| {
        let log = log.clone();
        move |_| format!("the firmware log does not show {what} (log: {log})")
    };
    let dgram = dgram.map_err(missing(format!("{TEST_PINGS} datagrams echoed")))?;
    let rdm = rdm.map_err(missing(format!(
        "{TEST_RDM_MSGS} RDM messages and {TEST_RDM_PINGS} tagged messages echoed"
    )))?;
    println!(
        "firmware log shows the runs:\n    {}\n    {}",
        dgram.trim(),
        rdm.trim()
    );
    println!(
        "host side (DGRAM and RDM runs, QEMU TCG) took {:.1} s",
        took.as_secs_f64()
    );
    Ok(())
}

/// The `N` of "`key` N echoed" in a statistics line of the image (`key` is the word
/// before the count: `received,` on the DGRAM line, `msg` or `tagged` on the RDM line).
fn echoed_in(line: &str, key: &str) -> Option<u64> {
    let (_, after) = line.split_once(&format!("{key} "))?;
    let (n, rest) = after.split_once(' ')?;
    rest.starts_with("echoed").then(|| n.parse().ok())?
}

/// QEMU and defmt-print, installed when missing.
fn ensure_run_prerequisites() -> Result {
    if !cmd::on_path("qemu-system-aarch64") {
        let missing =
            crate::prereq::missing_packages(&Workspace::locate(), crate::prereq::DEBIAN_PACKAGES);
        let can_install = cmd::is_root() && cmd::on_path("apt-get");
        crate::prereq::ensure_debian_packages(&missing, can_install)?;
    }
    if !cmd::succeeds(Command::new("defmt-print").arg("--version")) {
        cmd::run(&mut cmd::cargo(["install", "defmt-print", "--locked"]))?;
    }
    if !cmd::is_root() {
        return Err("booting the image needs root (it wires QEMU to a TAP device)".into());
    }
    if !cmd::on_path("ip") {
        return Err("`ip` (iproute2) is needed to address the TAP device".into());
    }
    Ok(())
}

/// A TAP subnet nobody uses: `10.213.<n>.0/24` on `fwtap<n>`.
struct TapNet {
    n: u8,
    tap: String,
}

impl TapNet {
    /// The first `n` in 200..=249 with no such interface and no address in its subnet.
    fn pick() -> Result<Self> {
        let addrs = cmd::output(Command::new("ip").args(["-4", "-o", "addr", "show"]))?;
        let links = cmd::output(Command::new("ip").args(["-o", "link", "show"]))?;
        let start = 200 + (std::process::id() % 50) as u8;
        (0..50u8)
            .map(|i| 200 + (start - 200 + i) % 50)
            .find(|n| {
                !addrs.contains(&format!("10.213.{n}.")) && !links.contains(&format!("fwtap{n}:"))
            })
            .map(|n| TapNet {
                n,
                tap: format!("fwtap{n}"),
            })
            .ok_or_else(|| "no free 10.213.200-249.0/24 subnet for the TAP device".into())
    }
    fn host_ip(&self) -> String {
        format!("10.213.{}.1", self.n)
    }
    fn fw_ip(&self) -> String {
        format!("10.213.{}.2", self.n)
    }
    /// The MAC that places the image at [`TapNet::fw_ip`].
    fn fw_mac(&self) -> String {
        format!("02:00:0a:d5:{:02x}:02", self.n)
    }
}

/// A running image: QEMU, the log decoder, and the TAP they share. Dropping it stops
/// everything and removes the device.
struct Vm {
    qemu: Child,
    decoder: Option<Child>,
    reader: Option<std::thread::JoinHandle<()>>,
    lines: Arc<Mutex<Vec<String>>>,
    log_path: PathBuf,
    tap: String,
}

impl Vm {
    /// Starts QEMU with the TAP and the decoder on its serial output; waits until the
    /// TAP exists, then addresses it. `echo` prints the decoded log as it comes (else it
    /// goes to `target/firmware/firmware.log` only, and is printed on failure).
    fn boot(image: &Path, net: &TapNet, echo: bool) -> Result<Self> {
        let dir = image
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .unwrap_or(Path::new("target"))
            .join("firmware");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log_path = dir.join("firmware.log");
        // QEMU must not outlive xtask whatever kills it (a signal to xtask alone skips
        // every destructor): `setpriv --pdeathsig` has the kernel kill it then, and the
        // TAP device goes with it.
        let mut qemu = if cmd::on_path("setpriv") {
            let mut c = Command::new("setpriv");
            c.args(["--pdeathsig", "KILL", "--", "qemu-system-aarch64"]);
            c
        } else {
            Command::new("qemu-system-aarch64")
        };
        qemu.args([
            "-M",
            "virt",
            "-cpu",
            "cortex-a57",
            "-m",
            "128M",
            "-smp",
            "1",
        ])
        .args(["-display", "none", "-monitor", "none", "-serial", "stdio"])
        .args(["-semihosting", "-no-reboot"])
        .args(["-global", "virtio-mmio.force-legacy=false"])
        .arg("-netdev")
        .arg(format!(
            "tap,id=n0,ifname={},script=no,downscript=no",
            net.tap
        ))
        .arg("-device")
        .arg(format!(
            "virtio-net-device,netdev=n0,mac={},host_mtu={MTU}",
            net.fw_mac()
        ))
        .arg("-kernel")
        .arg(image)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
        println!("    $ {}", cmd::display(&qemu));
        let mut qemu = qemu
            .spawn()
            .map_err(|e| format!("could not start qemu-system-aarch64: {e}"))?;
        let serial = qemu.stdout.take();
        let mut vm = Vm {
            qemu,
            decoder: None,
            reader: None,
            lines: Arc::new(Mutex::new(Vec::new())),
            log_path,
            tap: net.tap.clone(),
        };
        let mut decoder = Command::new("defmt-print");
        decoder
            .arg("-e")
            .arg(image)
            .stdin(serial.map_or(Stdio::null(), Stdio::from))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut decoder = decoder
            .spawn()
            .map_err(|e| format!("could not start defmt-print: {e}"))?;
        let out = decoder.stdout.take();
        vm.decoder = Some(decoder);
        let lines = Arc::clone(&vm.lines);
        let mut file = std::fs::File::create(&vm.log_path)
            .map_err(|e| format!("{}: {e}", vm.log_path.display()))?;
        vm.reader = out.map(|out| {
            std::thread::spawn(move || {
                use std::io::Write as _;
                for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
                    if echo {
                        println!("fw| {line}");
                    }
                    let _ = writeln!(file, "{line}");
                    if let Ok(mut v) = lines.lock() {
                        v.push(line);
                    }
                }
            })
        });
        // QEMU creates the TAP device when it opens it; address it then.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !Path::new("/sys/class/net").join(&net.tap).exists() {
            if Instant::now() > deadline || vm.qemu.try_wait().ok().flatten().is_some() {
                vm.stop();
                return Err(format!("QEMU did not create TAP device {}", net.tap));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let prefix = format!("{}/24", net.host_ip());
        let mtu = MTU.to_string();
        let setup = cmd::run(Command::new("ip").args(["addr", "add", &prefix, "dev", &net.tap]))
            .and_then(|()| {
                cmd::run(Command::new("ip").args(["link", "set", &net.tap, "mtu", &mtu, "up"]))
            });
        if let Err(e) = setup {
            vm.stop();
            return Err(e);
        }
        Ok(vm)
    }

    /// Waits until a decoded log line satisfies `pred`; fails (with the log so far) if
    /// QEMU ends or `timeout` passes first.
    fn wait_for(&mut self, pred: impl Fn(&str) -> bool, timeout: Duration) -> Result<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self
                .lines
                .lock()
                .ok()
                .and_then(|v| v.iter().find(|l| pred(l)).cloned())
            {
                return Ok(l);
            }
            if let Ok(Some(status)) = self.qemu.try_wait() {
                self.finish_log();
                return Err(format!("QEMU ended early ({status}); {}", self.tail()));
            }
            if Instant::now() > deadline {
                return Err(format!("timed out after {timeout:?}; {}", self.tail()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for_line(&mut self, needle: &str, timeout: Duration) -> Result<String> {
        self.wait_for(|l| l.contains(needle), timeout)
            .map_err(|e| format!("the firmware never logged `{needle}`: {e}"))
    }

    /// The last lines of the decoded log, for error messages.
    fn tail(&self) -> String {
        let v = self.lines.lock().map(|v| v.clone()).unwrap_or_default();
        let start = v.len().saturating_sub(20);
        format!(
            "firmware log ({}), last lines:\n{}",
            self.log_path.display(),
            v[start..].join("\n")
        )
    }

    /// Lets the decoder drain after QEMU ended.
    fn finish_log(&mut self) {
        if let Some(mut d) = self.decoder.take() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while d.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }

    /// Stops QEMU (the TAP goes with it) and the decoder; removes the TAP if it
    /// lingers.
    fn stop(&mut self) {
        if self.qemu.try_wait().ok().flatten().is_none() {
            let _ = self.qemu.kill();
        }
        let _ = self.qemu.wait();
        self.finish_log();
        if Path::new("/sys/class/net").join(&self.tap).exists() {
            let _ = cmd::succeeds(Command::new("ip").args(["link", "del", &self.tap]));
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `cmd` with inherited output, killing it after `timeout`.
fn run_with_timeout(command: &mut Command, timeout: Duration) -> Result {
    let shown = cmd::display(command);
    println!("    $ {shown}");
    let mut child = command
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => return Err(format!("`{shown}` failed ({s})")),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{shown}` timed out after {timeout:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for `{shown}`: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_lines_parse() {
        let l = "1.000 INFO  dgram echo: 2000 received, 1999 echoed (123 bytes), 0 errors";
        assert_eq!(echoed_in(l, "received,"), Some(1999));
        assert_eq!(echoed_in(l, "tagged"), None);
        assert_eq!(echoed_in("ready: nothing", "received,"), None);
        let r =
            "9.1 INFO  rdm echo: msg 40 echoed (5 bytes), tagged 10000 echoed (7 bytes), 0 errors";
        assert_eq!(echoed_in(r, "msg"), Some(40));
        assert_eq!(echoed_in(r, "tagged"), Some(10000));
        assert_eq!(echoed_in(r, "received,"), None);
    }

    #[test]
    fn sizes_of_this_executable() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let sections = elf_sections(&exe).unwrap();
        let s = Sizes::of(&sections);
        assert!(s.text > 0 && s.code() >= s.text);
        assert!(sections.iter().any(|(n, _)| n == ".bss"));
        assert!(elf_sections(b"not an elf").is_err());
    }
}
