//! Handshake bodies: the input is placed behind a valid HELLO / HELLO_ACK / REJECT /
//! RETRY base header (first byte picks the type and CRC flag), so the fuzzer spends its
//! time in the handshake parsers (HELLO's cookie and MAC, RETRY's cookie) instead of
//! the base-header checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::Repr;
use wire::packet::{MAGIC, Packet, PacketType, VERSION, flags};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let ptype = match sel % 4 {
        0 => PacketType::Hello,
        1 => PacketType::HelloAck,
        2 => PacketType::Reject,
        _ => PacketType::Retry,
    };
    let len = 24 + body.len();
    if len > 65535 {
        return;
    }
    let mut buf = [0u8; 65536];
    let pkt_buf = &mut buf[..len];
    pkt_buf[24..].copy_from_slice(body);
    let mut p = Packet::new_unchecked(&mut pkt_buf[..]);
    p.set_magic(MAGIC);
    p.set_version(VERSION);
    p.set_packet_type(ptype);
    p.set_flags(if sel & 0x80 != 0 { flags::CRC } else { 0 });
    p.set_packet_len(len as u16);
    p.set_session(if sel & 0x40 != 0 { 0x1122_3344 } else { 0 });
    p.fill_checksum();
    if let Ok(repr) = Repr::parse_bytes(&buf[..len]) {
        let mut out = [0u8; 65536];
        let n = repr.emit_bytes(&mut out).expect("a parsed packet re-emits");
        assert_eq!(&out[..n], &buf[..len]);
    }
});
