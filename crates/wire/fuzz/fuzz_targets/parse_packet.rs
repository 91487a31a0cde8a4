//! Any datagram: parsing never panics, and whatever parses re-emits to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::Repr;
use wire::packet::Packet;

fuzz_target!(|data: &[u8]| {
    let view = Packet::new_unchecked(data);
    let _ = (view.seq(), view.body().len(), view.verify_checksum());
    if let Ok(repr) = Repr::parse_bytes(data) {
        let len = view.packet_len() as usize;
        let mut out = [0u8; 65536];
        let n = repr.emit_bytes(&mut out).expect("a parsed packet re-emits");
        assert_eq!(&out[..n], &data[..len], "canonical encoding");
    }
});
