//! FI_EP_MSG in the safe API over real UDP loopback sockets: connect and accept with CM
//! data, messages both ways, refusal with data of every size, a backlog of 100 pending
//! requests, a peer that stops answering mid-transfer, shutdown after the data and
//! reconnecting.

use std::time::{Duration, Instant};

use hosted::api::{Buf, ConnEvent, Cq, Domain, Endpoint, Fabric, PassiveEndpoint};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::Flags;
use hosted::ofi_nostd::info::EpType;

const WAIT: Duration = Duration::from_secs(10);

struct Side {
    domain: Domain<u64>,
    cq: Cq<u64>,
}

fn side(fabric: &Fabric) -> Side {
    let domain = fabric.domain().open::<u64>().unwrap();
    let cq = domain.cq(0).unwrap();
    Side { domain, cq }
}

impl Side {
    fn ep(&self) -> Endpoint<u64> {
        let ep = self.domain.endpoint(EpType::Msg).unwrap();
        ep.bind_cq(&self.cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep
    }
}

/// A client endpoint connected to a server endpoint accepted from `pep`.
fn connect(
    client: &Side,
    server: &Side,
    pep: &PassiveEndpoint<u64>,
    data: &[u8],
) -> (Endpoint<u64>, Endpoint<u64>) {
    let c = client.ep();
    c.connect(pep.addr(), data).unwrap();
    let req = pep.request(WAIT).unwrap();
    assert_eq!(req.from, c.addr());
    assert_eq!(req.data, data);
    let s = server.ep();
    pep.accept(&req, &s, b"welcome").unwrap();
    assert_eq!(c.wait_connected(WAIT).unwrap(), b"welcome");
    assert_eq!(s.wait_connected(WAIT).unwrap(), b"");
    assert_eq!(c.peer().unwrap(), s.addr());
    assert_eq!(s.peer().unwrap(), c.addr());
    (c, s)
}

/// Sends `len` bytes from `from` to `to` and checks they arrived.
fn transfer(
    from: (&Endpoint<u64>, &Cq<u64>),
    to: (&Endpoint<u64>, &Cq<u64>),
    len: usize,
    seed: u8,
) {
    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    to.0.recv(Buf::zeroed(len.max(1)), 0, 2).unwrap();
    // The address is ignored on a connected endpoint.
    from.0.send(Buf::from(data.clone()), 12345, 1).unwrap();
    let mut got = None;
    let mut sent = false;
    let deadline = Instant::now() + WAIT;
    while (got.is_none() || !sent) && Instant::now() < deadline {
        for cq in [from.1, to.1] {
            if let Ok(c) = cq.read() {
                c.result().unwrap();
                if c.context == 2 {
                    got = Some(c.buf[..c.len].to_vec());
                } else {
                    sent = true;
                }
            }
        }
    }
    assert!(sent, "the send of {len} completed");
    assert_eq!(got.as_deref(), Some(&data[..]), "{len} bytes arrived");
}

#[test]
fn connect_accept_exchange_every_size_and_shut_down() {
    let fabric = Fabric::open().unwrap();
    let (client, server) = (side(&fabric), side(&fabric));
    let pep = server.domain.passive_endpoint().unwrap();
    let c0 = client.ep();
    assert_eq!(c0.peer().unwrap_err(), Errno::ENOTCONN);
    let (c, s) = connect(&client, &server, &pep, b"hello");
    assert_eq!(c.connect(pep.addr(), b"").unwrap_err(), Errno::EISCONN);
    let mut len = 1;
    while len <= 1 << 20 {
        transfer((&c, &client.cq), (&s, &server.cq), len, 1);
        transfer((&s, &server.cq), (&c, &client.cq), len, 2);
        len *= 4;
    }
    // The last message, then fi_shutdown: the server sees it, then FI_SHUTDOWN.
    s.recv(Buf::zeroed(16), 0, 9).unwrap();
    c.send(Buf::from(&b"goodbye"[..]), 0, 8).unwrap();
    c.shutdown().unwrap();
    assert_eq!(
        c.send(Buf::from(&b"late"[..]), 0, 7)
            .map(|_| ())
            .unwrap_err()
            .errno,
        Errno::ENOTCONN
    );
    // One thread runs both sides: the client's domain needs passes too (its data is
    // acknowledged, then its SHUTDOWN leaves).
    let deadline = Instant::now() + WAIT;
    let ev = loop {
        client.domain.progress().unwrap();
        match s.cm_event(Duration::from_millis(1)) {
            Err(e) if e.errno() == Errno::EAGAIN && Instant::now() < deadline => {}
            other => break other.unwrap(),
        }
    };
    assert_eq!(ev, ConnEvent::Shutdown);
    let mut got = Vec::new();
    while let Ok(c) = server.cq.read() {
        got.push((c.context, c.buf[..c.len].to_vec()));
    }
    assert!(
        got.contains(&(9, b"goodbye".to_vec())),
        "the data came first: {got:?}"
    );
}

#[test]
fn refused_with_data_of_every_size() {
    let fabric = Fabric::open().unwrap();
    let (client, server) = (side(&fabric), side(&fabric));
    let pep = server.domain.passive_endpoint().unwrap();
    let data: Vec<u8> = (0..=255u8).collect();
    for n in 0..=256 {
        let c = client.ep();
        c.connect(pep.addr(), &data[..n]).unwrap();
        let req = pep.request(WAIT).unwrap();
        assert_eq!(req.data, &data[..n]);
        pep.reject(&req, &data[256 - n..]).unwrap();
        assert_eq!(
            c.cm_event(WAIT).unwrap(),
            ConnEvent::Refused(data[256 - n..].to_vec())
        );
        c.close();
    }
}

#[test]
fn a_hundred_pending_requests_wait_for_a_small_backlog() {
    const N: usize = 100;
    let fabric = Fabric::open().unwrap();
    let (client, server) = (side(&fabric), side(&fabric));
    let pep = server.domain.passive_endpoint().unwrap();
    pep.set_backlog(8).unwrap();
    let cs: Vec<_> = (0..N).map(|_| client.ep()).collect();
    for (i, c) in cs.iter().enumerate() {
        c.connect(pep.addr(), &[i as u8]).unwrap();
    }
    let mut accepted = Vec::new();
    let mut seen = [false; N];
    let deadline = Instant::now() + Duration::from_secs(30);
    while accepted.len() < N && Instant::now() < deadline {
        // The clients' domain needs progress too (their retries).
        client.domain.progress().unwrap();
        let Ok(req) = pep.request(Duration::from_millis(1)) else {
            continue;
        };
        assert!(!seen[req.data[0] as usize], "request {} twice", req.data[0]);
        seen[req.data[0] as usize] = true;
        let s = server.ep();
        pep.accept(&req, &s, b"").unwrap();
        accepted.push(s);
    }
    assert_eq!(accepted.len(), N, "every request was reported once");
    for c in &cs {
        assert_eq!(c.wait_connected(WAIT).unwrap(), b"");
    }
}

#[test]
fn a_peer_that_stops_answering_mid_transfer_is_a_shutdown() {
    let fabric = Fabric::open().unwrap();
    let (client, server) = (side(&fabric), side(&fabric));
    let pep = server.domain.passive_endpoint().unwrap();
    let (c, s) = connect(&client, &server, &pep, b"");
    transfer((&c, &client.cq), (&s, &server.cq), 1000, 3);
    // The server process hangs: its domain never runs again (manual progress).
    let start = Instant::now();
    c.send(Buf::from(vec![1u8; 100_000]), 0, 5).unwrap();
    assert_eq!(
        c.cm_event(Duration::from_secs(60)).unwrap(),
        ConnEvent::Shutdown
    );
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "reported within the retry budget: {took:?}"
    );
    drop((s, pep));
}

#[test]
fn reconnect_after_shutdown() {
    let fabric = Fabric::open().unwrap();
    let (client, server) = (side(&fabric), side(&fabric));
    let pep = server.domain.passive_endpoint().unwrap();
    for round in 0..3u8 {
        let (c, s) = connect(&client, &server, &pep, &[round]);
        transfer((&c, &client.cq), (&s, &server.cq), 100, round);
        s.shutdown().unwrap();
        assert_eq!(c.cm_event(WAIT).unwrap(), ConnEvent::Shutdown);
        c.close();
        s.close();
    }
}

/// `ofi-pingpong -e msg -c`: the server listens on a passive endpoint, the client
/// connects; every byte is checked, both directions.
#[test]
fn ofi_pingpong_over_a_connection() {
    use std::process::{Command, Stdio};
    let bin = env!("CARGO_BIN_EXE_ofi-pingpong");
    const ARGS: [&str; 7] = ["-e", "msg", "-c", "-S", "100000", "-I", "5"];
    let port = 20000 + (std::process::id() % 20000) as u16;
    let mut server = Command::new(bin)
        .args(ARGS)
        .args(["-B", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The server says when it listens.
    let mut err = std::io::BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert!(line.contains("listening"), "{line}");
    let client = Command::new(bin)
        .args(ARGS)
        .args(["-P", &port.to_string()])
        .arg("127.0.0.1")
        .output()
        .unwrap();
    let status = server.wait().unwrap();
    let out = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "client: {out} {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(status.success(), "server failed");
    assert!(out.contains("=5"), "five round trips: {out}");
}
