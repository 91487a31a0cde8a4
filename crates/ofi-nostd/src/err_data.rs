//! Provider error data and error text of error entries: the `err_data` /
//! `err_data_size` rules of fi_cq(3) and fi_eq(3) readerr, and fi_cq_strerror /
//! fi_eq_strerror.
//!
//! A leaf module: CQs and EQs both apply these rules, and neither depends on the other
//! for them.

use crate::errno::{Errno, Result};

/// The most provider error data an error entry carries; the domain advertises this as
/// `fi_domain_attr::max_err_data`. Large enough for any native address (FI_SOURCE_ERR
/// puts the unknown source address here).
pub const MAX_ERR_DATA: usize = 32;

/// `FI_VERSION(1, 5)`: from this API version on, `err_data`/`err_data_size` may name a
/// buffer of the application (fi_cq(3), fi_eq(3)).
pub const API_VERSION_1_5: u32 = (1 << 16) | 5;

/// Provider error data carried by an error entry: at most `N` bytes ([`MAX_ERR_DATA`]
/// for CQ entries; EQ entries carry a connection's reject data, so theirs is larger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrData<const N: usize = MAX_ERR_DATA> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> ErrData<N> {
    /// No error data.
    pub const EMPTY: ErrData<N> = ErrData {
        len: 0,
        bytes: [0; N],
    };

    /// Error data holding `data`; -FI_EINVAL if it is longer than `N`.
    pub fn new(data: &[u8]) -> Result<ErrData<N>> {
        if data.len() > N || data.len() > usize::from(u16::MAX) {
            return Err(Errno::EINVAL);
        }
        let mut e = ErrData::EMPTY;
        e.bytes[..data.len()].copy_from_slice(data);
        e.len = data.len() as u16;
        Ok(e)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is no error data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> Default for ErrData<N> {
    fn default() -> Self {
        ErrData::EMPTY
    }
}

/// Where a readerr call put the error data (the `err_data`/`err_data_size` rules of
/// fi_cq(3) and fi_eq(3)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrDataOut {
    /// API >= 1.5 and the application gave a buffer (`err_data_size` > 0 on input): this
    /// many bytes were copied into it; `err_data` keeps pointing at the application's
    /// buffer and `err_data_size` must be set to this count.
    Copied(usize),
    /// API < 1.5, or `err_data_size` was 0: `err_data` must point at the provider's buffer
    /// (`last_err_data()` of the queue, valid until the next read call on it), holding
    /// this many bytes. With API >= 1.5 `err_data_size` is set to this count; with API
    /// < 1.5 the application's struct is the 1.0 layout, which has no `err_data_size`
    /// field, and it must not be written.
    ProviderOwned(usize),
}

/// Applies the err_data rules: copy into the application's buffer, or keep the data in
/// the provider-owned buffer `keep`.
pub(crate) fn deliver_err_data<const N: usize>(
    api_version: u32,
    data: &ErrData<N>,
    user: &mut [u8],
    keep: &mut ErrData<N>,
) -> ErrDataOut {
    if api_version >= API_VERSION_1_5 && !user.is_empty() {
        let n = user.len().min(data.len());
        user[..n].copy_from_slice(&data.as_slice()[..n]);
        ErrDataOut::Copied(n)
    } else {
        *keep = *data;
        ErrDataOut::ProviderOwned(data.len())
    }
}

/// The text for a provider error number (fi_cq_strerror / fi_eq_strerror). This provider's
/// `prov_errno` values are libfabric error numbers, of either sign.
pub fn strerror(prov_errno: i32) -> &'static str {
    if prov_errno == 0 {
        return "Success";
    }
    match Errno::from_code(prov_errno) {
        Some(e) => e.message(),
        None => "Unknown error",
    }
}

/// Copies [`strerror`]'s text into `buf` as a NUL-terminated C string, truncated to fit
/// (the `buf`/`len` form of fi_cq_strerror). Returns the number of text bytes copied,
/// without the NUL; nothing is written to an empty buffer.
pub fn strerror_into(prov_errno: i32, buf: &mut [u8]) -> usize {
    let Some(room) = buf.len().checked_sub(1) else {
        return 0;
    };
    let text = strerror(prov_errno).as_bytes();
    let n = text.len().min(room);
    buf[..n].copy_from_slice(&text[..n]);
    buf[n] = 0;
    n
}
