//! `ofi-info`: the `fi_info` of the ofi-nostd stack (see [`hosted::ofi_info`]).

#![forbid(unsafe_code)]

use std::io;

fn main() {
    let code = hosted::ofi_info::run(
        std::env::args_os(),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    std::process::exit(code);
}
