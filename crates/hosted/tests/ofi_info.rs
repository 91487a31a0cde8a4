//! Runs the built `ofi-info` binary on this host's interfaces.

use std::process::{Command, Output};

fn ofi_info(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ofi-info"))
        .args(args)
        .output()
        .expect("run ofi-info")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("utf-8 stdout")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("utf-8 stderr")
}

/// The `type:` values of a short listing, in order.
fn types(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.strip_prefix("    type: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn default_listing_rdm_before_dgram_before_msg() {
    let o = ofi_info(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("provider: nostd\n    fabric: nostd\n    domain: "));
    let entries = out.matches("provider: nostd\n").count();
    let t = types(&out);
    assert_eq!(t.len(), entries);
    // Every up IPv4 interface (at least lo) gives one RDM, one DGRAM and one MSG entry.
    assert!(entries >= 3 && entries.is_multiple_of(3), "{out}");
    let first_dgram = t
        .iter()
        .position(|t| t == "FI_EP_DGRAM")
        .expect("a DGRAM entry");
    let first_msg = t
        .iter()
        .position(|t| t == "FI_EP_MSG")
        .expect("a MSG entry");
    assert_eq!(first_dgram, entries / 3);
    assert_eq!(first_msg, 2 * entries / 3);
    assert!(t[..first_dgram].iter().all(|t| t == "FI_EP_RDM"));
    assert!(t[first_dgram..first_msg].iter().all(|t| t == "FI_EP_DGRAM"));
    assert!(t[first_msg..].iter().all(|t| t == "FI_EP_MSG"));
    // Six lines per entry, in fi_info's order.
    let keys: Vec<&str> = out
        .lines()
        .take(6)
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "provider",
            "    fabric",
            "    domain",
            "    version",
            "    type",
            "    protocol"
        ]
    );
    assert!(out.contains("    version: 1.0\n"));
    assert!(out.contains("    domain: lo\n"));
}

#[test]
fn ep_type_filters() {
    let o = ofi_info(&["-t", "FI_EP_DGRAM"]);
    assert!(o.status.success());
    let t = types(&stdout(&o));
    assert!(!t.is_empty());
    assert!(t.iter().all(|t| t == "FI_EP_DGRAM"));

    let o = ofi_info(&["--ep_type=FI_EP_RDM"]);
    assert!(o.status.success());
    let t = types(&stdout(&o));
    assert!(!t.is_empty());
    assert!(t.iter().all(|t| t == "FI_EP_RDM"));

    // Connection-oriented endpoints.
    let o = ofi_info(&["-t", "FI_EP_MSG"]);
    assert!(o.status.success());
    let t = types(&stdout(&o));
    assert!(!t.is_empty());
    assert!(t.iter().all(|t| t == "FI_EP_MSG"));
}

#[test]
fn tagged_caps_filter_out_dgram() {
    let o = ofi_info(&["-c", "FI_MSG|FI_TAGGED"]);
    assert!(o.status.success());
    let t = types(&stdout(&o));
    assert!(!t.is_empty());
    assert!(
        t.iter().all(|t| t == "FI_EP_RDM" || t == "FI_EP_MSG"),
        "{t:?}"
    );
    assert!(t.iter().any(|t| t == "FI_EP_MSG"));
}

#[test]
fn other_provider_is_no_data() {
    let o = ofi_info(&["-p", "udp"]);
    assert_eq!(o.status.code(), Some(61));
    assert_eq!(stdout(&o), "");
    assert_eq!(stderr(&o), "fi_getinfo: -61\n");
    let o = ofi_info(&["-p", "nostd"]);
    assert!(o.status.success());
}

/// Where libfabric's own `fi_info` is installed, it fails the same way.
#[test]
fn no_data_matches_system_fi_info() {
    let Ok(sys) = Command::new("fi_info").args(["-p", "nosuch"]).output() else {
        return;
    };
    let ours = ofi_info(&["-p", "nosuch"]);
    assert_eq!(ours.status.code(), sys.status.code());
    assert_eq!(ours.stdout, sys.stdout);
    assert_eq!(ours.stderr, sys.stderr);
}

#[test]
fn verbose_dumps_whole_info() {
    let o = ofi_info(&["-v"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.starts_with("---\nfi_info:\n    caps: [ FI_MSG, "));
    assert!(out.contains("    fi_domain_attr:\n        domain: 0x0\n"));
    assert!(out.contains("        prov_name: nostd\n"));
    assert!(out.contains("    nic: (nil)\n"));
    assert_eq!(
        out.matches("---\nfi_info:\n").count(),
        types(&stdout(&ofi_info(&[]))).len()
    );
}

#[test]
fn list_shows_nostd() {
    let o = ofi_info(&["-l"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "nostd:\n    version: 1.0\n");
}

#[test]
fn env_prints_no_params() {
    let o = ofi_info(&["-e"]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "");
}

#[test]
fn bad_values_exit_einval() {
    let o = ofi_info(&["-c", "FI_MSG|FI_NOPE"]);
    assert_eq!(o.status.code(), Some(22));
    assert_eq!(stderr(&o), "error: Unrecognized capability: FI_NOPE\n");
    let o = ofi_info(&["-t", "RDM"]);
    assert_eq!(o.status.code(), Some(22));
    assert_eq!(stderr(&o), "error: Unrecognized endpoint type: RDM\n");
    let o = ofi_info(&["-m", "FI_NOPE"]);
    assert_eq!(o.status.code(), Some(22));
    assert_eq!(stderr(&o), "error: Unrecognized mode: FI_NOPE\n");
}

#[test]
fn help_and_unknown_options_exit_1() {
    let o = ofi_info(&["--help"]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.starts_with("Usage: "));
    assert!(out.contains("  -p, --provider=PROV\t\tspecify provider explicitly\n"));
    let o = ofi_info(&["-x"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).ends_with(": invalid option -- 'x'\n"));
}

#[test]
fn source_address_selects_interface() {
    let o = ofi_info(&["-s", "127.0.0.1", "-P", "5000", "-v"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("src_addr: fi_sockaddr_in://127.0.0.1:5000\n"));
    assert!(out.contains("        name: lo\n"));
    // A name that resolves (through getaddrinfo) is a destination.
    let o = ofi_info(&["-n", "localhost", "-t", "FI_EP_RDM"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("provider: nostd\n    fabric: nostd\n    domain: lo\n"));
}
