//! How a user writes an auth key (`ofi-pingpong --auth-key`, the provider's
//! `FI_NOSTD_AUTH_KEY`): `0x` and an even number of hex digits is those bytes, anything
//! else the string's own bytes. One rule for every tool, so the same text gives the
//! same key everywhere.

use ofi_nostd::info::AUTH_KEY_CAP;

/// A parsed key (a type of its own, so that command-line parsers take it as one value,
/// not as a list of bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(pub Vec<u8>);

impl Key {
    /// [`parse`], as a [`Key`].
    pub fn parse(s: &str) -> Result<Key, String> {
        parse(s).map(Key)
    }
}

/// The key `s` names: hex after `0x`, else the UTF-8 bytes. Empty, or longer than the
/// core's [`AUTH_KEY_CAP`] bytes, is an error that says why.
pub fn parse(s: &str) -> Result<Vec<u8>, String> {
    let key = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.len() % 2 == 0 => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| format!("auth key {s:?}: not hex after 0x"))?,
        Some(_) => {
            return Err(format!(
                "auth key {s:?}: 0x needs an even number of hex digits"
            ));
        }
        None => s.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return Err("auth key: empty".into());
    }
    if key.len() > AUTH_KEY_CAP {
        return Err(format!(
            "auth key: {} bytes, at most {AUTH_KEY_CAP}",
            key.len()
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_after_0x_else_the_string() {
        assert_eq!(parse("0x00ff10").unwrap(), vec![0x00, 0xff, 0x10]);
        assert_eq!(parse("0XAb").unwrap(), vec![0xab]);
        assert_eq!(parse("secret").unwrap(), b"secret".to_vec());
        assert_eq!(parse("0y12").unwrap(), b"0y12".to_vec());
        assert!(parse("0x123").is_err());
        assert!(parse("0xzz").is_err());
        assert!(parse("0x").is_err());
        assert!(parse("").is_err());
        assert!(parse(&"k".repeat(AUTH_KEY_CAP + 1)).is_err());
        assert_eq!(
            parse(&"k".repeat(AUTH_KEY_CAP)).unwrap().len(),
            AUTH_KEY_CAP
        );
    }
}
