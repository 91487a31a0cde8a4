//! Any datagram: parsing never panics, whatever parses re-emits to the same bytes, and
//! the MAC trailer (spec 4.10) is found only inside the datagram.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::Repr;
use wire::packet::{Packet, mac};

fuzz_target!(|data: &[u8]| {
    let view = Packet::new_unchecked(data);
    let _ = (view.seq(), view.body().len(), view.verify_checksum());
    if let Ok((signed, tag)) = mac::split(data) {
        assert!(signed.len() + tag.len() <= data.len(), "trailer inside the datagram");
    }
    if let Ok(repr) = Repr::parse_bytes(data) {
        let len = view.packet_len() as usize;
        let mut out = [0u8; 65536];
        let n = repr.emit_bytes(&mut out).expect("a parsed packet re-emits");
        // The MAC flag belongs to the trailer, not to the representation.
        if mac::has_mac(data) {
            mac::set_mac_flag(&mut out[..n]);
        }
        assert_eq!(&out[..n], &data[..len], "canonical encoding");
    }
});
