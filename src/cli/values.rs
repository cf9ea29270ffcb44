//! Values as typed on the command line, parsed into types before any command runs.

/// The longest id accepted, in bytes; the runtime's own are 34.
pub const MAX_ID_BYTES: usize = 256;

/// An id argument: 1 to 256 bytes, no whitespace or control characters.
pub fn parse_id(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("an id cannot be empty".into());
    }
    if text.len() > MAX_ID_BYTES {
        return Err(format!(
            "an id is at most {MAX_ID_BYTES} bytes; this one is {}",
            text.len()
        ));
    }
    if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("an id holds no spaces or control characters".into());
    }
    Ok(text.to_string())
}

/// A channel name as typed: any case, surrounding whitespace trimmed.
pub fn parse_channel(text: &str) -> Result<crate::model::Channel, String> {
    text.parse()
        .map_err(|err: crate::model::UnknownChannel| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_bounded_and_printable() {
        assert!(parse_id("n-01a2290d4b65729fba573b68b0fccf93").is_ok());
        assert!(parse_id("").is_err());
        assert!(parse_id(&"n".repeat(257)).is_err());
        assert!(parse_id("n-1\x1b[2J").is_err());
        assert!(parse_id("n 1").is_err());
    }
}
