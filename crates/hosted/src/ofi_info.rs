//! `ofi-info`: libfabric 1.17's `fi_info` tool for the `nostd` provider.
//!
//! Same options, same output and same exit codes as `fi_info`:
//!
//! * the default listing is `fi_info`'s short form (provider, fabric, domain, version,
//!   type, protocol) per entry, RDM entries first; `-v` prints `---` and the whole
//!   `fi_tostr(FI_TYPE_INFO)` per entry; `-l` lists the provider (`nostd:` / `version`);
//!   `-e` prints the provider's parameters (there are none yet, so nothing);
//! * `-c`, `-m`, `-t`, `-a`, `-p`, `-d`, `-f` build hints (`-m` replaces the default
//!   "every mode" with the listed ones), `-n`/`-P` name the destination, `-s` the source
//!   (FI_SOURCE);
//! * when `fi_getinfo` fails the tool prints `fi_getinfo: <ret>` (e.g. `fi_getinfo: -61`,
//!   as `fi_info` 1.17 does, without a message) to stderr and exits with `-ret`;
//! * an unrecognized capability, mode, endpoint type or address format prints
//!   `error: Unrecognized …: <value>` and exits with 22 (EINVAL); an unknown option or a
//!   missing option argument prints a getopt-style message to stderr and the usage to
//!   stdout and exits with 1; so does `-h`.
//!
//! Like `fi_info` 1.17, `-l` lists every provider whatever the filters say, and `-e`
//! still runs `fi_getinfo` first (so `-e -p udp` fails like `-p udp`).

use crate::sysinfo::{HostInterface, StdResolver, host_interfaces};
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{ArgAction, CommandFactory, FromArgMatches, Parser};
use ofi_nostd::errno::Errno;
use ofi_nostd::flags::{Flags, Mode, MrMode};
use ofi_nostd::info::{
    API_VERSION, AddrFormat, EpType, Info, Interface, MAX_ENTRIES_PER_INTERFACE, Provider,
    ProviderConfig, fi_major, fi_minor, getinfo, name,
};
use ofi_nostd::tostr;
use std::ffi::OsString;
use std::fmt;
use std::io::{self, Write};

/// Exit code of `-h`, an unknown option or a missing option argument (getopt errors).
pub const EXIT_USAGE: i32 = 1;

/// Exit code of an unrecognized option value: EINVAL, as `fi_info` returns `-(-EINVAL)`.
pub const EXIT_BAD_VALUE: i32 = 22;

/// The options of `fi_info` 1.17 (parsed with clap; help and errors are printed the way
/// `fi_info` prints them, see [`run`]).
#[derive(Parser, Debug, Default, Clone, PartialEq, Eq)]
#[command(
    name = "ofi-info",
    disable_help_flag = true,
    disable_version_flag = true,
    infer_long_args = true,
    args_override_self = true
)]
pub struct Args {
    /// `-h, --help`: print the usage and exit (with status 1, as `fi_info`).
    #[arg(short = 'h', long = "help")]
    pub help: bool,
    /// `-s, --src_addr=ADDR` (alias `--source`): source name or address; sets FI_SOURCE.
    #[arg(
        short = 's',
        long = "src_addr",
        alias = "source",
        value_name = "ADDR",
        allow_hyphen_values = true
    )]
    pub src_addr: Option<String>,
    /// `-n, --node=NAME`: destination node name or address.
    #[arg(
        short = 'n',
        long = "node",
        value_name = "NAME",
        allow_hyphen_values = true
    )]
    pub node: Option<String>,
    /// `-P, --port=PNUM`: port number (the `service`).
    #[arg(
        short = 'P',
        long = "port",
        value_name = "PNUM",
        allow_hyphen_values = true
    )]
    pub port: Option<String>,
    /// `-c, --caps=CAP1|CAP2..`: capabilities; repeated options accumulate.
    #[arg(short = 'c', long = "caps", value_name = "CAP1|CAP2..", action = ArgAction::Append, allow_hyphen_values = true)]
    pub caps: Vec<String>,
    /// `-m, --mode=MOD1|MOD2..`: the modes the application supports (default: all).
    #[arg(
        short = 'm',
        long = "mode",
        value_name = "MOD1|MOD2..",
        allow_hyphen_values = true
    )]
    pub mode: Option<String>,
    /// `-t, --ep_type=EPTYPE`: a single endpoint type.
    #[arg(
        short = 't',
        long = "ep_type",
        value_name = "EPTYPE",
        allow_hyphen_values = true
    )]
    pub ep_type: Option<String>,
    /// `-d, --domain=DOMAIN`: domain name.
    #[arg(
        short = 'd',
        long = "domain",
        value_name = "DOMAIN",
        allow_hyphen_values = true
    )]
    pub domain: Option<String>,
    /// `-f, --fabric=FABRIC`: fabric name.
    #[arg(
        short = 'f',
        long = "fabric",
        value_name = "FABRIC",
        allow_hyphen_values = true
    )]
    pub fabric: Option<String>,
    /// `-a, --addr_format=FMT`: accepted address format.
    #[arg(
        short = 'a',
        long = "addr_format",
        value_name = "FMT",
        allow_hyphen_values = true
    )]
    pub addr_format: Option<String>,
    /// `-p, --provider=PROV`: provider name (only `nostd` matches).
    #[arg(
        short = 'p',
        long = "provider",
        value_name = "PROV",
        allow_hyphen_values = true
    )]
    pub provider: Option<String>,
    /// `-e, --env`: print the provider's parameters.
    #[arg(short = 'e', long = "env")]
    pub env: bool,
    /// `-g, --getenv=SUBSTR`: `-e`, limited to parameters containing SUBSTR.
    #[arg(
        short = 'g',
        long = "getenv",
        value_name = "SUBSTR",
        allow_hyphen_values = true
    )]
    pub getenv: Option<String>,
    /// `-i, --info=SUBSTR`: `-v`, limited to entries whose text contains SUBSTR.
    #[arg(
        short = 'i',
        long = "info",
        value_name = "SUBSTR",
        allow_hyphen_values = true
    )]
    pub info: Option<String>,
    /// `-l, --list`: list the providers.
    #[arg(short = 'l', long = "list")]
    pub list: bool,
    /// `-v, --verbose`: print whole `fi_info` structures.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// `--version`: print version information and exit.
    #[arg(long = "version")]
    pub version: bool,
    /// Operands, ignored (getopt leaves them to a program that does not read them).
    #[arg(hide = true, value_name = "IGNORED")]
    pub operands: Vec<OsString>,
}

/// What the options ask `fi_getinfo` for, once the values are parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// `node`: `-n` or `-s`, whichever came last.
    pub node: Option<String>,
    /// `service`: `-P`.
    pub service: Option<String>,
    /// FI_SOURCE (`-s` given) and FI_PROV_ATTR_ONLY (`-l`).
    pub flags: Flags,
    /// The hints, if any filtering option was given (`fi_info` passes NULL otherwise).
    pub hints: Option<Info>,
    /// Substring filter of `-g` / `-i`, whichever came last (they share one variable in
    /// `fi_info`).
    pub filter: Option<String>,
    /// What to print.
    pub output: Output,
}

/// The output format, in `fi_info`'s order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// `-e` / `-g`: provider parameters.
    Env,
    /// `-v` / `-i`: whole structures.
    Verbose,
    /// `-l`: provider names and versions.
    List,
    /// The short listing.
    #[default]
    Short,
}

/// A value `fi_info` does not recognize, for an option that takes names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnrecognizedValue {
    /// What was being parsed: `capability`, `mode`, `endpoint type`, `address format`.
    pub what: &'static str,
    /// The offending token.
    pub value: String,
}

impl fmt::Display for UnrecognizedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Unrecognized {}: {}", self.what, self.value)
    }
}

impl std::error::Error for UnrecognizedValue {}

/// The capability names `fi_info` 1.17 accepts (FI_MORE and FI_PEEK are op flags it
/// accepts too; no provider offers them as capabilities).
const CAP_NAMES: &[(&str, Flags)] = &[
    ("FI_MSG", Flags::MSG),
    ("FI_RMA", Flags::RMA),
    ("FI_TAGGED", Flags::TAGGED),
    ("FI_ATOMIC", Flags::ATOMIC),
    ("FI_MULTICAST", Flags::MULTICAST),
    ("FI_COLLECTIVE", Flags::COLLECTIVE),
    ("FI_READ", Flags::READ),
    ("FI_WRITE", Flags::WRITE),
    ("FI_RECV", Flags::RECV),
    ("FI_SEND", Flags::SEND),
    ("FI_REMOTE_READ", Flags::REMOTE_READ),
    ("FI_REMOTE_WRITE", Flags::REMOTE_WRITE),
    ("FI_MULTI_RECV", Flags::MULTI_RECV),
    ("FI_REMOTE_CQ_DATA", Flags::REMOTE_CQ_DATA),
    ("FI_MORE", Flags::MORE),
    ("FI_PEEK", Flags::PEEK),
    ("FI_TRIGGER", Flags::TRIGGER),
    ("FI_FENCE", Flags::FENCE),
    ("FI_SOURCE_ERR", Flags::SOURCE_ERR),
    ("FI_LOCAL_COMM", Flags::LOCAL_COMM),
    ("FI_REMOTE_COMM", Flags::REMOTE_COMM),
    ("FI_SHARED_AV", Flags::SHARED_AV),
    ("FI_RMA_EVENT", Flags::RMA_EVENT),
    ("FI_SOURCE", Flags::SOURCE),
    ("FI_NAMED_RX_CTX", Flags::NAMED_RX_CTX),
    ("FI_DIRECTED_RECV", Flags::DIRECTED_RECV),
    ("FI_HMEM", Flags::HMEM),
];

/// The mode names `fi_info` 1.17 accepts.
const MODE_NAMES: &[(&str, Mode)] = &[
    ("FI_CONTEXT", Mode::CONTEXT),
    ("FI_MSG_PREFIX", Mode::MSG_PREFIX),
    ("FI_ASYNC_IOV", Mode::ASYNC_IOV),
    ("FI_RX_CQ_DATA", Mode::RX_CQ_DATA),
    ("FI_LOCAL_MR", Mode::LOCAL_MR),
    ("FI_NOTIFY_FLAGS_ONLY", Mode::NOTIFY_FLAGS_ONLY),
    ("FI_RESTRICTED_COMP", Mode::RESTRICTED_COMP),
    ("FI_CONTEXT2", Mode::CONTEXT2),
];

/// The endpoint types `fi_info` 1.17 accepts.
const EP_TYPES: &[EpType] = &[
    EpType::Unspec,
    EpType::Msg,
    EpType::Dgram,
    EpType::Rdm,
    EpType::SockStream,
    EpType::SockDgram,
];

/// The address formats `fi_info` 1.17 accepts (a subset of those `<rdma/fabric.h>`
/// defines: the newer ones cannot be asked for from the command line).
const ADDR_FORMATS: &[AddrFormat] = &[
    AddrFormat::UNSPEC,
    AddrFormat::SOCKADDR,
    AddrFormat::SOCKADDR_IN,
    AddrFormat::SOCKADDR_IN6,
    AddrFormat::SOCKADDR_IB,
    AddrFormat::PSMX,
    AddrFormat::GNI,
    AddrFormat::BGQ,
    AddrFormat::MLX,
    AddrFormat::STR,
    AddrFormat::PSMX2,
    AddrFormat::EFA,
];

/// Parses a `|`-separated list of names (case-insensitive, empty tokens skipped, as
/// `strtok` does) by `lookup`.
fn parse_list<T: Copy + Default + std::ops::BitOr<Output = T>>(
    s: &str,
    what: &'static str,
    lookup: impl Fn(&str) -> Option<T>,
) -> Result<T, UnrecognizedValue> {
    s.split('|')
        .filter(|t| !t.is_empty())
        .try_fold(T::default(), |acc, tok| match lookup(tok) {
            Some(v) => Ok(acc | v),
            None => Err(UnrecognizedValue {
                what,
                value: tok.to_owned(),
            }),
        })
}

/// Parses `-c`: `FI_MSG|FI_TAGGED` → FI_MSG | FI_TAGGED.
pub fn parse_caps(s: &str) -> Result<Flags, UnrecognizedValue> {
    parse_list(s, "capability", |t| {
        CAP_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(t))
            .map(|&(_, f)| f)
    })
}

/// Parses `-m`: `FI_CONTEXT|FI_CONTEXT2` → FI_CONTEXT | FI_CONTEXT2.
pub fn parse_mode(s: &str) -> Result<Mode, UnrecognizedValue> {
    parse_list(s, "mode", |t| {
        MODE_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(t))
            .map(|&(_, m)| m)
    })
}

/// Parses `-t`: one endpoint type name, e.g. `FI_EP_RDM`.
pub fn parse_ep_type(s: &str) -> Result<EpType, UnrecognizedValue> {
    EP_TYPES
        .iter()
        .copied()
        .find(|t| t.c_name().eq_ignore_ascii_case(s))
        .ok_or_else(|| UnrecognizedValue {
            what: "endpoint type",
            value: s.to_owned(),
        })
}

/// Parses `-a`: one address format name, e.g. `FI_SOCKADDR_IN`.
pub fn parse_addr_format(s: &str) -> Result<AddrFormat, UnrecognizedValue> {
    ADDR_FORMATS
        .iter()
        .copied()
        .find(|f| f.c_name().is_some_and(|n| n.eq_ignore_ascii_case(s)))
        .ok_or_else(|| UnrecognizedValue {
            what: "address format",
            value: s.to_owned(),
        })
}

/// `fi_info`'s hints before any option: every mode, every domain mode, every mr_mode
/// bit but the legacy FI_MR_BASIC / FI_MR_SCALABLE.
pub fn default_hints() -> Info {
    let mut h = Info {
        mode: Mode::all(),
        ..Info::default()
    };
    h.domain_attr.mode = Mode::all();
    h.domain_attr.mr_mode = MrMode::all().difference(MrMode::BASIC | MrMode::SCALABLE);
    h
}

impl Query {
    /// The query for parsed options. `src_last` / `info_last` say whether `-s` came
    /// after `-n` and `-i` after `-g` (getopt order, which clap does not keep in
    /// [`Args`]).
    pub fn from_args(
        args: &Args,
        src_last: bool,
        info_last: bool,
    ) -> Result<Query, UnrecognizedValue> {
        let mut hints = default_hints();
        let mut use_hints = false;
        for c in &args.caps {
            hints.caps |= parse_caps(c)?;
            use_hints = true;
        }
        if let Some(m) = &args.mode {
            hints.mode = parse_mode(m)?;
            use_hints = true;
        }
        if let Some(t) = &args.ep_type {
            hints.ep_attr.ep_type = parse_ep_type(t)?;
            use_hints = true;
        }
        if let Some(a) = &args.addr_format {
            hints.addr_format = parse_addr_format(a)?;
            use_hints = true;
        }
        if let Some(p) = &args.provider {
            hints.fabric_attr.prov_name = name(p);
            use_hints = true;
        }
        if let Some(d) = &args.domain {
            hints.domain_attr.name = name(d);
            use_hints = true;
        }
        if let Some(f) = &args.fabric {
            hints.fabric_attr.name = name(f);
            use_hints = true;
        }

        let mut flags = Flags::empty();
        if args.src_addr.is_some() {
            flags |= Flags::SOURCE;
        }
        if args.list {
            flags |= Flags::PROV_ATTR_ONLY;
        }
        let node = match (&args.src_addr, &args.node) {
            (Some(s), Some(n)) => Some(if src_last { s } else { n }),
            (s, n) => s.as_ref().or(n.as_ref()),
        }
        .cloned();
        let filter = match (&args.getenv, &args.info) {
            (Some(g), Some(i)) => Some(if info_last { i } else { g }),
            (g, i) => g.as_ref().or(i.as_ref()),
        }
        .cloned();
        let output = if args.env || args.getenv.is_some() {
            Output::Env
        } else if args.verbose || args.info.is_some() {
            Output::Verbose
        } else if args.list {
            Output::List
        } else {
            Output::Short
        };
        Ok(Query {
            node,
            service: args.port.clone(),
            flags,
            hints: use_hints.then_some(hints),
            filter,
            output,
        })
    }
}

/// The type of a provider parameter (`enum fi_param_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// FI_PARAM_STRING.
    String,
    /// FI_PARAM_INT.
    Int,
    /// FI_PARAM_BOOL.
    Bool,
    /// FI_PARAM_SIZE_T.
    SizeT,
}

impl ParamType {
    /// The name `fi_info -e` prints.
    pub const fn describe(self) -> &'static str {
        match self {
            ParamType::String => "String",
            ParamType::Int => "Integer",
            ParamType::SizeT => "size_t",
            ParamType::Bool => "Boolean (0/1, on/off, true/false, yes/no)",
        }
    }
}

/// A provider parameter (`struct fi_param`): an environment variable that tunes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Variable name, e.g. `FI_NOSTD_IFACE`.
    pub name: &'static str,
    /// Value type.
    pub kind: ParamType,
    /// Help text.
    pub help: &'static str,
}

/// The `nostd` provider's parameters: none yet.
pub const PARAMS: &[Param] = &[];

/// Writes parameters as `fi_info -e` does: `# NAME: Type`, `# help`, `NAME=value` when
/// `value` returns one (quoted if it contains a space), a blank line; only names
/// containing `filter` (case-insensitively) when given.
pub fn write_params(
    w: &mut dyn Write,
    params: &[Param],
    filter: Option<&str>,
    value: impl Fn(&str) -> Option<String>,
) -> io::Result<()> {
    for p in params {
        if filter.is_some_and(|f| !contains_ignore_case(p.name, f)) {
            continue;
        }
        writeln!(w, "# {}: {}", p.name, p.kind.describe())?;
        writeln!(w, "# {}", p.help)?;
        if let Some(v) = value(p.name) {
            let q = if v.contains(' ') { "\"" } else { "" };
            writeln!(w, "{}={q}{v}{q}", p.name)?;
        }
        writeln!(w)?;
    }
    Ok(())
}

fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    haystack
        .to_ascii_lowercase()
        .contains(&needle.to_ascii_lowercase())
}

/// Writes the `getinfo` results in the query's output format.
pub fn write_infos(w: &mut dyn Write, infos: &[Info], q: &Query) -> io::Result<()> {
    let mut buf = String::new();
    match q.output {
        Output::Env => {
            return write_params(w, PARAMS, q.filter.as_deref(), |n| std::env::var(n).ok());
        }
        Output::Verbose => {
            for i in infos {
                buf.clear();
                tostr::write_info(&mut buf, i).map_err(io::Error::other)?;
                if q.filter
                    .as_deref()
                    .is_none_or(|f| contains_ignore_case(&buf, f))
                {
                    w.write_all(b"---\n")?;
                    w.write_all(buf.as_bytes())?;
                }
            }
            return Ok(());
        }
        Output::List => {
            for i in infos {
                let f = &i.fabric_attr;
                writeln!(w, "{}:", f.prov_name)?;
                let v = f.prov_version;
                writeln!(w, "    version: {}.{}", fi_major(v), fi_minor(v))?;
            }
        }
        Output::Short => {
            for i in infos {
                tostr::write_short(&mut buf, i).map_err(io::Error::other)?;
            }
        }
    }
    w.write_all(buf.as_bytes())
}

/// `fi_info`'s usage, after the `Usage: <argv0>` line.
const USAGE: &str = "  -h, --help\t\t\tdisplay this help and exit
  -s, --src_addr=ADDR\t\tsource name or address
  -n, --node=NAME\t\tdest node name or address
  -P, --port=PNUM\t\tport number
  -c, --caps=CAP1|CAP2..\tone or more capabilities: FI_MSG|FI_RMA...
  -m, --mode=MOD1|MOD2..\tone or more modes, default all modes
  -t, --ep_type=EPTYPE\t\tspecify single endpoint type: FI_EP_MSG, FI_EP_DGRAM...
  -d, --domain=DOMAIN\t\tspecify the domain name
  -f, --fabric=FABRIC\t\tspecify the fabric name
  -a, --addr_format=FMT\t\tspecify accepted address format: FI_FORMAT_UNSPEC, FI_SOCKADDR...
  -p, --provider=PROV\t\tspecify provider explicitly
  -e, --env\t\t\tprint libfabric environment variables
  -g, --getenv=SUBSTR\t\tprint libfabric environment variables with substr
  -i, --info=\t\tprint fi_info structures containing substr
  -l, --list\t\t\tlist available libfabric providers
  -v, --verbose\t\t\tverbose output
  --version\t\t\tprint version info and exit
";

/// Writes `fi_info`'s usage text for program name `prog`.
pub fn write_usage(w: &mut dyn Write, prog: &str) -> io::Result<()> {
    writeln!(w, "Usage: {prog}")?;
    w.write_all(USAGE.as_bytes())
}

/// The getopt-style message for a clap error (`invalid option -- 'x'`,
/// `unrecognized option '--foo'`, ...), without the program name.
fn getopt_message(e: &clap::Error, last_word: &str) -> String {
    let invalid = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    match e.kind() {
        ErrorKind::UnknownArgument if invalid.starts_with("--") => {
            format!("unrecognized option '{invalid}'")
        }
        ErrorKind::UnknownArgument => {
            let c = invalid
                .trim_start_matches('-')
                .chars()
                .next()
                .unwrap_or('?');
            format!("invalid option -- '{c}'")
        }
        ErrorKind::InvalidValue if !invalid.is_empty() => {
            // clap names the option by its long form ("--port <PNUM>"); getopt names it
            // as it was written, and a missing argument can only be the last word.
            let long = invalid.split(' ').next().unwrap_or(&invalid);
            match last_word.strip_prefix('-') {
                Some(w) if !w.starts_with('-') => {
                    let c = w.chars().last().unwrap_or('?');
                    format!("option requires an argument -- '{c}'")
                }
                _ => format!("option '{long}' requires an argument"),
            }
        }
        ErrorKind::TooManyValues if invalid.starts_with("--") => {
            let long = invalid.split(' ').next().unwrap_or(&invalid);
            format!("option '{long}' doesn't allow an argument")
        }
        _ => {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("").trim();
            first.strip_prefix("error: ").unwrap_or(first).to_owned()
        }
    }
}

/// Runs `ofi-info` with `argv` (program name first) on this host's interfaces; returns
/// the exit status.
pub fn run<I, T>(argv: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let host: Vec<HostInterface> = host_interfaces().unwrap_or_else(|e| {
        let _ = writeln!(err, "ofi-info: cannot list interfaces: {e}");
        Vec::new()
    });
    let ifaces: Vec<Interface<'_>> = host.iter().map(HostInterface::as_interface).collect();
    let prov = Provider {
        // What the provider library offers, FI_EP_MSG included.
        cfg: ProviderConfig {
            msg_ep: true,
            ..ProviderConfig::DEFAULT
        },
        interfaces: &ifaces,
        resolver: &StdResolver,
    };
    run_with(argv, &prov, out, err)
}

/// Runs `ofi-info` with `argv` (program name first) against `prov` (its interfaces,
/// resolver and limits); returns the exit status.
pub fn run_with<I, T>(argv: I, prov: &Provider<'_>, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = argv.into_iter().map(Into::into).collect();
    let prog = argv.first().map_or_else(
        || "ofi-info".to_owned(),
        |p| p.to_string_lossy().into_owned(),
    );
    let last_word = argv
        .last()
        .map(|w| w.to_string_lossy().into_owned())
        .unwrap_or_default();
    let matches = match Args::command().try_get_matches_from(&argv) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(err, "{prog}: {}", getopt_message(&e, &last_word));
            let _ = write_usage(out, &prog);
            return EXIT_USAGE;
        }
    };
    let args = match Args::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => {
            let _ = writeln!(err, "{prog}: {}", getopt_message(&e, &last_word));
            let _ = write_usage(out, &prog);
            return EXIT_USAGE;
        }
    };
    if args.version {
        let mut lib = String::new();
        let _ = tostr::write_version(&mut lib);
        let _ = write!(
            out,
            "{prog}: {}\nlibfabric: {lib}\nlibfabric api: {}.{}\n",
            env!("CARGO_PKG_VERSION"),
            fi_major(API_VERSION),
            fi_minor(API_VERSION)
        );
        return 0;
    }
    if args.help {
        let _ = write_usage(out, &prog);
        return EXIT_USAGE;
    }
    let src_last = matches.index_of("src_addr") > matches.index_of("node");
    let info_last = matches.index_of("info") > matches.index_of("getenv");
    let q = match Query::from_args(&args, src_last, info_last) {
        Ok(q) => q,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return EXIT_BAD_VALUE;
        }
    };
    // fi_getinfo ignores hints with FI_PROV_ATTR_ONLY: `fi_info -l -p udp` lists all.
    let hints = if q.flags.contains(Flags::PROV_ATTR_ONLY) {
        None
    } else {
        q.hints.as_ref()
    };
    let mut infos =
        vec![Info::default(); (prov.interfaces.len() * MAX_ENTRIES_PER_INTERFACE).max(1)];
    let n = match getinfo(
        API_VERSION,
        q.node.as_deref(),
        q.service.as_deref(),
        q.flags,
        hints,
        prov,
        &mut infos,
    ) {
        Ok(n) => n,
        Err(e) => return getinfo_failed(err, e),
    };
    // Output errors (a closed pipe) are not reported, as printf's are not.
    let _ = write_infos(out, &infos[..n], &q).and_then(|()| out.flush());
    0
}

/// Reports a failed `fi_getinfo` as `fi_info` does; returns the exit status.
fn getinfo_failed(err: &mut dyn Write, e: Errno) -> i32 {
    let _ = writeln!(err, "fi_getinfo: -{}", e.code());
    e.code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_nostd::info::NoResolver;

    const IFACES: &[Interface<'static>] = &[
        Interface {
            name: "eth0",
            ip: [10, 0, 0, 5],
            prefix_len: 24,
            mtu: 1500,
            loopback: false,
        },
        Interface {
            name: "lo",
            ip: [127, 0, 0, 1],
            prefix_len: 8,
            mtu: 65536,
            loopback: true,
        },
    ];

    fn prov() -> Provider<'static> {
        Provider {
            cfg: ProviderConfig::DEFAULT,
            interfaces: IFACES,
            resolver: &NoResolver,
        }
    }

    fn run_args(args: &[&str]) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv = std::iter::once("ofi-info").chain(args.iter().copied());
        let code = run_with(argv, &prov(), &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn caps_parse() {
        assert_eq!(parse_caps("FI_MSG").unwrap(), Flags::MSG);
        assert_eq!(
            parse_caps("FI_MSG|FI_TAGGED").unwrap(),
            Flags::MSG | Flags::TAGGED
        );
        assert_eq!(
            parse_caps("fi_msg||Fi_Directed_Recv|").unwrap(),
            Flags::MSG | Flags::DIRECTED_RECV
        );
        assert_eq!(parse_caps("").unwrap(), Flags::empty());
        let e = parse_caps("FI_MSG|FI_BOGUS").unwrap_err();
        assert_eq!(e.to_string(), "Unrecognized capability: FI_BOGUS");
        assert!(parse_caps("MSG").is_err());
        assert!(parse_caps("FI_MSG FI_TAGGED").is_err());
    }

    #[test]
    fn mode_parse() {
        assert_eq!(
            parse_mode("FI_CONTEXT|FI_CONTEXT2").unwrap(),
            Mode::CONTEXT | Mode::CONTEXT2
        );
        assert_eq!(parse_mode("fi_local_mr").unwrap(), Mode::LOCAL_MR);
        let e = parse_mode("FI_BUFFERED_RECV").unwrap_err();
        assert_eq!(e.to_string(), "Unrecognized mode: FI_BUFFERED_RECV");
    }

    #[test]
    fn ep_type_parse() {
        assert_eq!(parse_ep_type("FI_EP_RDM").unwrap(), EpType::Rdm);
        assert_eq!(parse_ep_type("fi_ep_dgram").unwrap(), EpType::Dgram);
        assert_eq!(
            parse_ep_type("FI_EP_SOCK_DGRAM").unwrap(),
            EpType::SockDgram
        );
        let e = parse_ep_type("FI_EP_RDM|FI_EP_DGRAM").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Unrecognized endpoint type: FI_EP_RDM|FI_EP_DGRAM"
        );
        assert!(parse_ep_type("RDM").is_err());
    }

    #[test]
    fn addr_format_parse() {
        assert_eq!(
            parse_addr_format("FI_SOCKADDR_IN").unwrap(),
            AddrFormat::SOCKADDR_IN
        );
        assert_eq!(parse_addr_format("fi_addr_str").unwrap(), AddrFormat::STR);
        let e = parse_addr_format("FI_ADDR_OPX").unwrap_err();
        assert_eq!(e.to_string(), "Unrecognized address format: FI_ADDR_OPX");
    }

    #[test]
    fn bad_values_exit_einval() {
        for (args, msg) in [
            (
                &["-c", "FI_BOGUS"][..],
                "error: Unrecognized capability: FI_BOGUS\n",
            ),
            (&["-m", "FI_X"], "error: Unrecognized mode: FI_X\n"),
            (
                &["-t", "FI_EP_X"],
                "error: Unrecognized endpoint type: FI_EP_X\n",
            ),
            (
                &["-a", "FI_X"],
                "error: Unrecognized address format: FI_X\n",
            ),
        ] {
            let (code, out, err) = run_args(args);
            assert_eq!(code, EXIT_BAD_VALUE, "{args:?}");
            assert_eq!(out, "");
            assert_eq!(err, msg);
        }
    }

    #[test]
    fn usage_errors_exit_1() {
        let (code, out, err) = run_args(&["-x"]);
        assert_eq!(code, EXIT_USAGE);
        assert!(out.starts_with("Usage: ofi-info\n  -h, --help\t\t\t"));
        assert_eq!(err, "ofi-info: invalid option -- 'x'\n");
        let (code, _, err) = run_args(&["--bogus"]);
        assert_eq!(code, EXIT_USAGE);
        assert_eq!(err, "ofi-info: unrecognized option '--bogus'\n");
        let (code, _, err) = run_args(&["-P"]);
        assert_eq!(code, EXIT_USAGE);
        assert_eq!(err, "ofi-info: option requires an argument -- 'P'\n");
        let (_, _, err) = run_args(&["--po"]);
        assert_eq!(err, "ofi-info: option '--port' requires an argument\n");
        let (code, _, err) = run_args(&["--verbose=3"]);
        assert_eq!(code, EXIT_USAGE);
        assert_eq!(
            err,
            "ofi-info: option '--verbose' doesn't allow an argument\n"
        );
        let (code, out, err) = run_args(&["-h"]);
        assert_eq!(code, EXIT_USAGE);
        assert_eq!(out, format!("Usage: ofi-info\n{USAGE}"));
        assert_eq!(err, "");
    }

    #[test]
    fn short_listing() {
        let (code, out, err) = run_args(&[]);
        assert_eq!((code, err.as_str()), (0, ""));
        let expected = "\
provider: nostd
    fabric: nostd
    domain: eth0
    version: 1.0
    type: FI_EP_RDM
    protocol: Provider specific
";
        assert!(out.starts_with(expected), "{out}");
        let types: Vec<_> = out.lines().filter(|l| l.starts_with("    type:")).collect();
        assert_eq!(
            types,
            [
                "    type: FI_EP_RDM",
                "    type: FI_EP_RDM",
                "    type: FI_EP_DGRAM",
                "    type: FI_EP_DGRAM"
            ]
        );
    }

    #[test]
    fn filters() {
        let (code, out, _) = run_args(&["-t", "FI_EP_DGRAM", "-d", "lo"]);
        assert_eq!(code, 0);
        assert_eq!(out.matches("provider: nostd").count(), 1);
        assert!(out.contains("domain: lo\n") && out.contains("FI_EP_DGRAM"));
        let (code, out, _) = run_args(&["-c", "FI_TAGGED"]);
        assert_eq!(code, 0);
        assert!(!out.contains("FI_EP_DGRAM"));
        let (code, out, err) = run_args(&["-p", "udp"]);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (61, "", "fi_getinfo: -61\n")
        );
        let (code, _, _) = run_args(&["-p", "NOSTD", "-f", "nostd"]);
        assert_eq!(code, 0);
        let (code, _, _) = run_args(&["-f", "other"]);
        assert_eq!(code, 61);
        // Without a resolver a host name cannot be found.
        let (code, _, err) = run_args(&["-n", "somehost"]);
        assert_eq!((code, err.as_str()), (61, "fi_getinfo: -61\n"));
    }

    #[test]
    fn node_and_source() {
        let (code, out, _) = run_args(&["-n", "10.0.0.9", "-v"]);
        assert_eq!(code, 0);
        assert!(
            out.contains("dest_addr: fi_sockaddr_in://10.0.0.9:0"),
            "{out}"
        );
        // -s: the node is the source; only that interface is offered.
        let (code, out, _) = run_args(&["-s", "127.0.0.1", "-P", "4000"]);
        assert_eq!(code, 0);
        assert!(!out.contains("eth0") && out.contains("domain: lo"));
        // -n after -s wins the node, FI_SOURCE stays.
        let (code, out, _) = run_args(&["-s", "10.0.0.9", "-n", "127.0.0.1"]);
        assert_eq!(code, 0);
        assert!(!out.contains("eth0"));
        let (code, _, _) = run_args(&["-n", "127.0.0.1", "-s", "10.0.0.9"]);
        assert_eq!(code, 61);
    }

    #[test]
    fn verbose_and_info_filter() {
        let (code, out, _) = run_args(&["-v"]);
        assert_eq!(code, 0);
        assert_eq!(out.matches("---\nfi_info:\n").count(), 4);
        assert!(out.contains("    fi_domain_attr:\n"));
        let (code, out, _) = run_args(&["-i", "FI_EP_dgram"]);
        assert_eq!(code, 0);
        assert_eq!(out.matches("---\n").count(), 2);
        assert!(!out.contains("type: FI_EP_RDM"));
    }

    #[test]
    fn list_env_version() {
        let (code, out, _) = run_args(&["-l"]);
        assert_eq!((code, out.as_str()), (0, "nostd:\n    version: 1.0\n"));
        let (code, out, _) = run_args(&["-l", "-p", "udp", "-t", "FI_EP_MSG"]);
        assert_eq!((code, out.as_str()), (0, "nostd:\n    version: 1.0\n"));
        let (code, out, _) = run_args(&["-e"]);
        assert_eq!((code, out.as_str()), (0, ""));
        let (code, _, err) = run_args(&["-e", "-p", "udp"]);
        assert_eq!((code, err.as_str()), (61, "fi_getinfo: -61\n"));
        let (code, out, _) = run_args(&["--version"]);
        assert_eq!(code, 0);
        assert_eq!(
            out,
            format!(
                "ofi-info: {}\nlibfabric: 1.17.0\nlibfabric api: 1.17\n",
                env!("CARGO_PKG_VERSION")
            )
        );
        let (code, _, _) = run_args(&["--verb", "-vl", "-P80", "--port=81", "extra"]);
        assert_eq!(code, 0);
    }

    #[test]
    fn params_format() {
        const P: &[Param] = &[
            Param {
                name: "FI_NOSTD_IFACE",
                kind: ParamType::String,
                help: "nostd: Specify interface name",
            },
            Param {
                name: "FI_NOSTD_TX_SIZE",
                kind: ParamType::SizeT,
                help: "nostd: define default tx context size",
            },
        ];
        let mut out = Vec::new();
        write_params(&mut out, P, None, |n| {
            (n == "FI_NOSTD_IFACE").then(|| "eth 0".to_owned())
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# FI_NOSTD_IFACE: String\n# nostd: Specify interface name\n\
             FI_NOSTD_IFACE=\"eth 0\"\n\n\
             # FI_NOSTD_TX_SIZE: size_t\n# nostd: define default tx context size\n\n"
        );
        let mut out = Vec::new();
        write_params(&mut out, P, Some("tx_size"), |_| None).unwrap();
        assert!(
            String::from_utf8(out)
                .unwrap()
                .starts_with("# FI_NOSTD_TX_SIZE")
        );
    }
}
