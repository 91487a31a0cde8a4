//! Unit tests of the connection and backlog state machines.

extern crate std;

use super::*;
use crate::storage::test_storage::VecStorage;

const PEP: EpAddr = EpAddr::new([10, 0, 0, 2], 7000, 0);
const ACC: EpAddr = EpAddr::new([10, 0, 0, 2], 7001, 3);
const CON: EpAddr = EpAddr::new([10, 0, 0, 1], 7000, 5);
const CFG: CmConfig = CmConfig::DEFAULT;

fn ms(n: u64) -> Instant {
    Instant::from_millis(n)
}

#[test]
fn retry_doubles_to_its_max_and_gives_up_after_the_budget() {
    let mut r = Retry::now(ms(0), &CFG);
    let mut t = ms(0);
    let mut waits = std::vec::Vec::new();
    for _ in 0..CFG.max_sends {
        assert!(r.due(t) && !r.exhausted(t, &CFG));
        r.sent(t, &CFG);
        waits.push((r.deadline() - t).total_micros() / 1000);
        t = r.deadline();
    }
    assert_eq!(&waits[..9], &[1, 2, 4, 8, 16, 32, 64, 128, 250]);
    assert!(waits[8..].iter().all(|w| *w == 250));
    assert!(r.exhausted(t, &CFG));
    assert_eq!(t - ms(0), CFG.budget());
    assert_eq!(CFG.budget().total_micros(), 255_000 + 59 * 250_000);
}

#[test]
fn connect_accept_established_on_both_sides() {
    let mut c = Conn::new().unwrap();
    let mut a = Conn::new().unwrap();
    assert_eq!(c.send_peer(), Err(Errno::ENOTCONN));
    c.connect(ms(0), &CFG, PEP, 77, b"hello").unwrap();
    assert_eq!(c.connect(ms(0), &CFG, PEP, 78, b""), Err(Errno::EISCONN));
    assert_eq!(c.due(ms(0)), Some(CmSend::ConnReq(PEP)));
    assert_eq!(c.data(), b"hello");
    c.sent(CmSend::ConnReq(PEP), ms(0), &CFG);
    assert_eq!(c.due(ms(0)), None, "waits for the retry");
    assert_eq!(c.deadline(), Some(ms(1)));
    // The listener side accepts from another port and endpoint id.
    a.accept(ms(1), &CFG, CON, 77, b"welcome").unwrap();
    assert_eq!(a.due(ms(1)), Some(CmSend::Accept(CON)));
    assert!(a.takes_from(&CON) && !a.takes_from(&PEP));
    // Wrong connection id, wrong IP: not ours.
    assert!(!c.on_accept(ACC, 78, b"x"));
    assert!(!c.on_accept(EpAddr::new([10, 0, 0, 9], 7001, 3), 77, b"x"));
    assert!(c.on_accept(ACC, 77, b"welcome"));
    assert_eq!(c.state(), ConnState::Connected);
    assert_eq!(c.peer(), Some(ACC));
    assert_eq!(c.send_peer(), Ok(ACC));
    assert_eq!(
        c.take_event(),
        Some(CmEventKind::Connected(cm_data(b"welcome")))
    );
    assert_eq!(c.take_event(), None);
    assert_eq!(c.due(ms(2)), Some(CmSend::Established(ACC)));
    c.sent(CmSend::Established(ACC), ms(2), &CFG);
    assert_eq!(c.due(ms(500)), None);
    // A repeated ACCEPT (our ESTABLISHED was lost) gets ESTABLISHED again, no event.
    assert!(c.on_accept(ACC, 77, b"welcome"));
    assert_eq!(c.due(ms(3)), Some(CmSend::Established(ACC)));
    assert!(!c.owes_event());
    assert!(a.on_established(CON, 77));
    assert_eq!(a.state(), ConnState::Connected);
    assert_eq!(a.take_event(), Some(CmEventKind::Connected(CmData::new())));
    assert!(a.on_established(CON, 77), "a repeat is ours, no new event");
    assert!(!a.owes_event());
}

#[test]
fn reject_reports_the_data_and_silence_times_out() {
    let mut c = Conn::new().unwrap();
    c.connect(ms(0), &CFG, PEP, 9, b"").unwrap();
    assert!(!c.on_reject(PEP, 8, b"no"), "another connection's");
    assert!(c.on_reject(PEP, 9, b"not now"));
    assert_eq!(c.state(), ConnState::Closed);
    assert_eq!(
        c.take_event(),
        Some(CmEventKind::Error {
            err: Errno::ECONNREFUSED,
            data: cm_data(b"not now"),
        })
    );
    let mut c = Conn::new().unwrap();
    c.connect(ms(0), &CFG, PEP, 9, b"").unwrap();
    let mut t = ms(0);
    let mut sends = 0;
    while c.state() != ConnState::Closed && sends < 1000 {
        if let Some(s) = c.due(t) {
            c.sent(s, t, &CFG);
            sends += 1;
        }
        t = c.deadline().unwrap_or(t).max(t);
        c.poll(t, &CFG, false, false);
    }
    assert_eq!(sends, CFG.max_sends);
    assert_eq!(t - ms(0), CFG.budget());
    assert_eq!(
        c.take_event(),
        Some(CmEventKind::Error {
            err: Errno::ETIMEDOUT,
            data: CmData::new(),
        })
    );
}

fn connected() -> (Conn, Conn) {
    let mut c = Conn::new().unwrap();
    let mut a = Conn::new().unwrap();
    c.connect(ms(0), &CFG, PEP, 5, b"").unwrap();
    a.accept(ms(0), &CFG, CON, 5, b"").unwrap();
    assert!(c.on_accept(ACC, 5, b""));
    c.sent(CmSend::Established(ACC), ms(0), &CFG);
    assert!(a.on_established(CON, 5));
    c.take_event();
    a.take_event();
    assert_eq!((c.due(ms(0)), a.due(ms(0))), (None, None));
    (c, a)
}

#[test]
fn shutdown_waits_for_the_data_then_the_peer_sees_it_once() {
    let (mut c, mut a) = connected();
    assert_eq!(
        Conn::new().unwrap().shutdown(ms(0), &CFG),
        Err(Errno::ENOTCONN)
    );
    c.shutdown(ms(10), &CFG).unwrap();
    assert_eq!(c.send_peer(), Err(Errno::ENOTCONN), "no new operations");
    c.poll(ms(11), &CFG, false, false);
    assert_eq!(c.due(ms(11)), None, "data still unacknowledged");
    c.poll(ms(12), &CFG, true, false);
    assert_eq!(c.due(ms(12)), Some(CmSend::Shutdown(ACC)));
    c.sent(CmSend::Shutdown(ACC), ms(12), &CFG);
    assert!(a.on_shutdown(CON, 5));
    assert_eq!(a.take_event(), Some(CmEventKind::Shutdown));
    assert_eq!(a.due(ms(12)), Some(CmSend::ShutdownAck(CON)));
    a.sent(CmSend::ShutdownAck(CON), ms(12), &CFG);
    // A repeated SHUTDOWN (the ack was lost): another ack, no second event.
    assert!(a.on_shutdown(CON, 5));
    assert!(!a.owes_event());
    assert_eq!(a.due(ms(13)), Some(CmSend::ShutdownAck(CON)));
    assert!(!c.on_shutdown_ack(CON, 5), "from the wrong address");
    assert!(c.on_shutdown_ack(ACC, 5));
    assert_eq!(c.state(), ConnState::Closed);
    assert_eq!(
        c.take_event(),
        Some(CmEventKind::Shutdown),
        "the side that shut down sees the end too, once"
    );
    assert!(!c.on_shutdown_ack(ACC, 5) || !c.owes_event());
    // The drain wait is bounded by the budget.
    let (mut c, _) = connected();
    c.shutdown(ms(0), &CFG).unwrap();
    c.poll(ms(0) + CFG.budget(), &CFG, false, false);
    assert_eq!(c.state(), ConnState::ShuttingDown);
}

#[test]
fn a_failed_session_is_a_shutdown() {
    let (mut c, _) = connected();
    c.poll(ms(1), &CFG, false, true);
    assert_eq!(c.state(), ConnState::Closed);
    assert_eq!(c.take_event(), Some(CmEventKind::Shutdown));
    assert_eq!(c.send_peer(), Err(Errno::ENOTCONN));
}

/// fabtests' `fi_cm_data` under loss: the connector's ESTABLISHED is lost and its
/// SHUTDOWN arrives first. The accepter still reports FI_CONNECTED, then FI_SHUTDOWN.
#[test]
fn a_shutdown_that_overtakes_a_lost_established_is_connected_then_shutdown() {
    let mut a = Conn::new().unwrap();
    a.accept(ms(0), &CFG, CON, 5, b"").unwrap();
    assert!(!a.on_shutdown(CON, 6), "another connection's");
    assert_eq!(a.state(), ConnState::Accepting);
    assert!(a.on_shutdown(CON, 5));
    assert_eq!(a.state(), ConnState::Closed);
    assert_eq!(a.take_event(), Some(CmEventKind::Connected(CmData::new())));
    assert_eq!(a.take_event(), Some(CmEventKind::Shutdown));
    assert_eq!(a.take_event(), None);
    assert_eq!(a.due(ms(1)), Some(CmSend::ShutdownAck(CON)));
    // The ESTABLISHED arriving late changes nothing.
    assert!(a.on_established(CON, 5));
    assert!(!a.owes_event());
}

fn listener(backlog: usize) -> Listener<VecStorage> {
    let cfg = CmConfig {
        backlog,
        backlog_slots: backlog * 2,
        ..CFG
    };
    let mut l = Listener::new(&mut VecStorage, &cfg, 1).unwrap();
    assert_eq!(l.listen(), Err(Errno::ENOEQ));
    l.eq = Some(1);
    l
}

fn from(i: u16) -> EpAddr {
    EpAddr::new([10, 0, 1, 1], 7000, i)
}

#[test]
fn backlog_reports_each_request_once_and_pushes_back_when_full() {
    let mut l = listener(2);
    assert_eq!(
        l.on_connreq(ms(0), from(1), 1, b"a"),
        ConnReqOutcome::NotListening
    );
    l.listen().unwrap();
    assert_eq!(l.listen(), Err(Errno::EOPBADSTATE));
    assert_eq!(l.on_connreq(ms(0), from(1), 1, b"a"), ConnReqOutcome::New);
    assert_eq!(
        l.on_connreq(ms(0), from(1), 1, b"a"),
        ConnReqOutcome::Repeat
    );
    assert_eq!(l.on_connreq(ms(0), from(2), 1, b"b"), ConnReqOutcome::New);
    assert_eq!(l.on_connreq(ms(0), from(3), 1, b"c"), ConnReqOutcome::Full);
    assert_eq!(l.stats().backlog_full, 1);
    let Some(CmEventKind::ConnReq { req, from: f, data }) = l.take_event() else {
        panic!("a request");
    };
    assert_eq!((f, &data[..]), (from(1), &b"a"[..]));
    let Some(CmEventKind::ConnReq { req: req2, .. }) = l.take_event() else {
        panic!("a second request");
    };
    assert_eq!(l.take_event(), None);
    // Accepting frees a backlog place (the slot lingers): the third connector's
    // retry now gets in.
    assert_eq!(l.take(ms(1), &CFG, req), Ok((from(1), 1)));
    assert_eq!(l.take(ms(1), &CFG, req), Err(Errno::EINVAL), "taken once");
    assert_eq!(
        l.on_connreq(ms(2), from(1), 1, b"a"),
        ConnReqOutcome::Repeat
    );
    assert_eq!(l.on_connreq(ms(2), from(3), 1, b"c"), ConnReqOutcome::New);
    assert_eq!(l.waiting(), 2);
    // A rejection is sent, and sent again to a repeat, with its data.
    l.reject(ms(3), &CFG, req2, b"go away").unwrap();
    assert_eq!(l.reject_due(), Some((1, from(2), 1, &b"go away"[..])));
    l.reject_sent(1);
    assert_eq!(l.reject_due(), None);
    assert_eq!(
        l.on_connreq(ms(4), from(2), 1, b"b"),
        ConnReqOutcome::Repeat
    );
    assert!(l.reject_due().is_some());
    l.reject_sent(1);
    // Forged ids are refused.
    assert_eq!(
        l.reject(ms(3), &CFG, ConnReqId(u64::MAX), b""),
        Err(Errno::EINVAL)
    );
    assert_eq!(l.take(ms(3), &CFG, ConnReqId(0)), Err(Errno::EINVAL));
    // Answered requests give their slot up when the slots run out (the one to be
    // forgotten first goes first), and are forgotten once the connectors' budget
    // passed.
    assert_eq!(l.on_connreq(ms(5), from(4), 1, b""), ConnReqOutcome::New);
    assert_eq!(
        l.on_connreq(ms(5), from(5), 1, b""),
        ConnReqOutcome::Full,
        "backlog"
    );
    let Some(CmEventKind::ConnReq { req: r3, .. }) = l.take_event() else {
        panic!("the third request");
    };
    l.take(ms(5), &CFG, r3).unwrap();
    assert_eq!(l.on_connreq(ms(6), from(5), 1, b""), ConnReqOutcome::New);
    assert_eq!(
        l.on_connreq(ms(6), from(1), 1, b"a"),
        ConnReqOutcome::Full,
        "the oldest answered request was forgotten: no longer a repeat"
    );
    let later = ms(6) + CFG.budget();
    assert_eq!(l.on_connreq(later, from(2), 1, b"b"), ConnReqOutcome::Full);
    assert_eq!(l.reject_due(), None, "the rejection is forgotten too");
}

#[test]
fn backlog_limits_are_checked() {
    let mut l = listener(4);
    assert_eq!(l.backlog(), 4);
    assert_eq!(l.set_backlog(0), Err(Errno::EINVAL));
    assert_eq!(l.set_backlog(9), Err(Errno::EINVAL));
    l.set_backlog(8).unwrap();
    l.listen().unwrap();
    for i in 0..8 {
        assert_eq!(l.on_connreq(ms(0), from(i), 1, b""), ConnReqOutcome::New);
    }
    assert_eq!(l.on_connreq(ms(0), from(8), 1, b""), ConnReqOutcome::Full);
}

#[test]
fn cm_data_is_cut_to_the_limit() {
    assert_eq!(cm_data(&[1; 300]).len(), CM_DATA_MAX);
    assert_eq!(&cm_data(b"ab")[..], b"ab");
}
