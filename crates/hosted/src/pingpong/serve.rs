//! Server mode (`--serve N|forever`): clients one after another on one endpoint.
//!
//! A client that fails does not end the server: killed mid-transfer, the engine fails
//! its session once the retry budget is spent (its operations complete with an error);
//! restarted from the same address before that, its new HELLO replaces the session
//! (the old session's operations fail with -FI_ECONNRESET) and its hello ends the old
//! client here. Either way the server says so in one line, forgets what it had in
//! flight for that client ([`Session::reset`](super::session::Session::reset)) and
//! serves the next hello.

use std::net::Ipv4Addr;
use std::time::Instant;

use super::run::Server;
use super::{Failure, Serve};

/// Serves clients until `count` of them have come (served or failed); fails at the end
/// if any failed, naming how many.
pub(super) fn run(sv: &mut Server<'_>, count: Serve) -> Result<(), Failure> {
    let (mut seen, mut failed) = (0u64, 0u64);
    loop {
        let deadline = match count {
            Serve::Forever => None,
            Serve::Clients(_) => Some(Instant::now() + sv.c.s.timeout),
        };
        let hello = sv.wait_hello(deadline)?;
        seen += 1;
        let who = Server::hello_addr(&hello).map_or("?".to_owned(), |a| {
            format!("{}:{}", Ipv4Addr::from(a.ip), a.port)
        });
        let started = Instant::now();
        match sv.client(hello) {
            Ok(()) => sv.c.log(format_args!("client {seen} ({who}) done")),
            Err(f) => {
                failed += 1;
                let _ = writeln!(
                    sv.c.err,
                    "ofi-pingpong: client {seen} ({who}) failed after {:.3}s: {f}",
                    started.elapsed().as_secs_f64()
                );
                let _ = sv.c.err.flush();
                let forgot = sv.c.s.reset()?;
                sv.c.log(format_args!(
                    "forgot client {seen}'s operations ({forgot} failed or cancelled)"
                ));
            }
        }
        if count == Serve::Clients(seen) {
            break;
        }
    }
    if failed > 0 {
        return Err(Failure::new(format!("{failed} of {seen} clients failed")));
    }
    Ok(())
}
