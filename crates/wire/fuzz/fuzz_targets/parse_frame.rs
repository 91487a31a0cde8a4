//! Any Ethernet frame: framing (Ethernet/IPv4/UDP/ARP) and then our packet never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::Repr;
use wire::frame::{self, ChecksumCapabilities, ParsedFrame};

fuzz_target!(|data: &[u8]| {
    // Checksums verified (the normal case) and offloaded (so corrupt frames get further).
    for caps in [
        ChecksumCapabilities::default(),
        ChecksumCapabilities::ignored(),
    ] {
        match frame::parse_frame(data, &caps) {
            Ok(ParsedFrame::Udp(f)) => {
                let payload = data.get(f.payload.clone()).expect("payload range in frame");
                let _ = Repr::parse_bytes(payload);
            }
            Ok(ParsedFrame::Arp(a)) => {
                let mut buf = [0u8; 64];
                let _ = frame::emit_arp_reply(&mut buf, a.target_mac, a.target_ip, &a);
            }
            Err(_) => {}
        }
    }
    let _ = frame::parse_arp(data);
});
