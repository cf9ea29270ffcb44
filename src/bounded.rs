//! Reading what another program sends without trusting its length: a server, a provider
//! or a pipe that never stops is read up to a stated limit, never into all of memory.

use std::io::Read;

/// Reads `reader` to its end into `buffer`, or up to `limit` bytes; false when there was
/// more than `limit` (what was read is kept, the rest is not read).
pub fn read_to_end_at_most(
    reader: impl Read,
    limit: u64,
    buffer: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let read = reader.take(limit.saturating_add(1)).read_to_end(buffer)?;
    if read as u64 > limit {
        buffer.truncate(buffer.len() - 1);
        return Ok(false);
    }
    Ok(true)
}

/// At most `limit` bytes of `reader`, as text (invalid UTF-8 replaced); for error
/// answers, which are shown, never parsed for anything that acts.
pub fn text_at_most(reader: impl Read, limit: u64) -> String {
    let mut buffer = Vec::new();
    let _ = read_to_end_at_most(reader, limit, &mut buffer);
    String::from_utf8_lossy(&buffer).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_reader_stops_at_the_limit() {
        let mut buffer = Vec::new();
        let whole = read_to_end_at_most(std::io::repeat(b'x'), 1000, &mut buffer).expect("read");
        assert!(!whole);
        assert_eq!(buffer.len(), 1000);

        let mut buffer = Vec::new();
        assert!(read_to_end_at_most(&b"short"[..], 1000, &mut buffer).expect("read"));
        assert_eq!(buffer, b"short");
        let mut exact = Vec::new();
        assert!(read_to_end_at_most(&[7u8; 1000][..], 1000, &mut exact).expect("read"));
        assert_eq!(exact.len(), 1000);
        assert_eq!(text_at_most(std::io::repeat(b'y'), 3), "yyy");
    }
}
