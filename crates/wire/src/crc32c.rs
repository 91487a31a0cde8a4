//! CRC32C (Castagnoli), the optional protocol checksum.
//!
//! Used on links that carry no UDP checksum (or where the data plane wants end-to-end
//! protection beyond the NIC). The 1 KiB lookup table is built at compile time, so the
//! code is allocation-free and fast enough for firmware without SSE4.2/ARMv8 CRC
//! instructions.

/// The reflected CRC32C polynomial (iSCSI, RFC 3720).
const POLY: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// An incremental CRC32C, so a packet can be checksummed in pieces (e.g. skipping the
/// checksum field itself) without copying.
#[derive(Debug, Clone, Copy)]
pub struct Crc32c(u32);

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32c {
    /// Start a new checksum.
    pub const fn new() -> Self {
        Crc32c(!0)
    }

    /// Feed bytes.
    pub fn update(&mut self, data: &[u8]) {
        let mut c = self.0;
        for &b in data {
            c = TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
        }
        self.0 = c;
    }

    /// The checksum of everything fed so far.
    pub const fn finish(&self) -> u32 {
        !self.0
    }
}

/// CRC32C of one buffer.
pub fn checksum(data: &[u8]) -> u32 {
    let mut c = Crc32c::new();
    c.update(data);
    c.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_vectors() {
        // RFC 3720 B.4 and the classic check value.
        assert_eq!(super::checksum(b"123456789"), 0xE306_9283);
        assert_eq!(super::checksum(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(super::checksum(&[0xFFu8; 32]), 0x62A8_AB43);
    }
}
