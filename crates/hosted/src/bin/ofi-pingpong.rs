//! `ofi-pingpong`: the `fi_pingpong` of the ofi-nostd stack (see [`hosted::pingpong`]).

#![forbid(unsafe_code)]

use std::io;

fn main() {
    let code = hosted::pingpong::run(
        std::env::args_os(),
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    );
    std::process::exit(code);
}
