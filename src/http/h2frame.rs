//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte frame header, the kinds and flags, error
//! codes, and the writers for the frames a client sends.

/// What a client sends first on a connection (RFC 9113 §3.4), before its SETTINGS.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// A frame header's length.
pub const HEADER_LEN: usize = 9;
/// The largest frame payload a peer accepts until its SETTINGS say more (and the most we
/// accept: we never raise it).
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// The largest window RFC 9113 §6.9.1 allows.
pub const MAX_WINDOW: i64 = (1 << 31) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    /// A kind this side does not know: ignored (RFC 9113 §4.1).
    Unknown(u8),
}

impl Kind {
    fn of(b: u8) -> Kind {
        match b {
            0 => Kind::Data,
            1 => Kind::Headers,
            2 => Kind::Priority,
            3 => Kind::RstStream,
            4 => Kind::Settings,
            5 => Kind::PushPromise,
            6 => Kind::Ping,
            7 => Kind::GoAway,
            8 => Kind::WindowUpdate,
            9 => Kind::Continuation,
            b => Kind::Unknown(b),
        }
    }
}

/// Flags (their meaning depends on the frame's kind).
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY: u8 = 0x20;

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub const HEADER_TABLE_SIZE: u16 = 1;
pub const ENABLE_PUSH: u16 = 2;
pub const MAX_CONCURRENT_STREAMS: u16 = 3;
pub const INITIAL_WINDOW_SIZE: u16 = 4;
pub const MAX_FRAME_SIZE: u16 = 5;
pub const MAX_HEADER_LIST_SIZE: u16 = 6;

/// An error code (RFC 9113 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason(pub u32);

impl Reason {
    pub const NO_ERROR: Reason = Reason(0);
    pub const PROTOCOL_ERROR: Reason = Reason(1);
    pub const INTERNAL_ERROR: Reason = Reason(2);
    pub const FLOW_CONTROL_ERROR: Reason = Reason(3);
    pub const STREAM_CLOSED: Reason = Reason(5);
    pub const FRAME_SIZE_ERROR: Reason = Reason(6);
    pub const REFUSED_STREAM: Reason = Reason(7);
    pub const CANCEL: Reason = Reason(8);
    pub const COMPRESSION_ERROR: Reason = Reason(9);
    pub const ENHANCE_YOUR_CALM: Reason = Reason(11);
    pub const HTTP_1_1_REQUIRED: Reason = Reason(13);
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        match NAMES.get(self.0 as usize) {
            Some(n) => f.write_str(n),
            None => write!(f, "error code {:#x}", self.0),
        }
    }
}

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: Kind,
    pub flags: u8,
    pub stream: u32,
}

/// The header at the start of `b`, if 9 bytes are there.
pub fn parse_head(b: &[u8]) -> Option<Head> {
    let h = b.get(..HEADER_LEN)?;
    Some(Head {
        len: usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]),
        kind: Kind::of(h[3]),
        flags: h[4],
        stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
    })
}

fn head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    let [_, l0, l1, l2] = (len as u32).to_be_bytes();
    let [s0, s1, s2, s3] = stream.to_be_bytes();
    [l0, l1, l2, kind, flags, s0, s1, s2, s3]
}

pub fn settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    head(out, values.len() * 6, 4, 0, 0);
    for (id, v) in values {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub fn settings_ack(out: &mut Vec<u8>) {
    head(out, 0, 4, ACK, 0);
}

pub fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    head(out, 4, 8, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn ping(out: &mut Vec<u8>, ack: bool, payload: [u8; 8]) {
    head(out, 8, 6, if ack { ACK } else { 0 }, 0);
    out.extend_from_slice(&payload);
}

pub fn rst_stream(out: &mut Vec<u8>, stream: u32, reason: Reason) {
    head(out, 4, 3, 0, stream);
    out.extend_from_slice(&reason.0.to_be_bytes());
}

pub fn goaway(out: &mut Vec<u8>, last_stream: u32, reason: Reason) {
    head(out, 8, 7, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&reason.0.to_be_bytes());
}

/// One DATA frame (`bytes` no longer than the peer's frame size).
pub fn data(out: &mut Vec<u8>, stream: u32, bytes: &[u8], end: bool) {
    head(
        out,
        bytes.len(),
        0,
        if end { END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(bytes);
}

/// A header block as HEADERS and as many CONTINUATION frames as `max_frame` needs.
pub fn headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame: usize) {
    let mut chunks = block.chunks(max_frame.max(1)).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let last = chunks.peek().is_none();
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    head(out, first.len(), 1, flags, stream);
    out.extend_from_slice(first);
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        head(out, c.len(), 9, if last { END_HEADERS } else { 0 }, stream);
        out.extend_from_slice(c);
    }
}

/// Room for a HEADERS frame's header in `out`, its header block to be written after it
/// directly (no copy of the block): where it starts, for [`headers_end`].
pub fn headers_begin(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.len() - HEADER_LEN
}

/// The header block written after [`headers_begin`]'s room at `at` made into frames: the
/// room becomes its HEADERS frame's header, or, for a block over `max_frame` (rare), the
/// block is cut into HEADERS and CONTINUATION frames.
pub fn headers_end(out: &mut Vec<u8>, at: usize, stream: u32, end_stream: bool, max_frame: usize) {
    let len = out.len() - at - HEADER_LEN;
    if len <= max_frame {
        let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
        out[at..at + HEADER_LEN].copy_from_slice(&head_bytes(len, 1, flags, stream));
        return;
    }
    let block = out.split_off(at + HEADER_LEN);
    out.truncate(at);
    headers(out, stream, &block, end_stream, max_frame);
}

/// A DATA or HEADERS payload without its padding (RFC 9113 §6.1): `None` when the padding
/// does not fit (a connection error).
pub fn unpad(payload: &[u8], flags: u8) -> Option<&[u8]> {
    if flags & PADDED == 0 {
        return Some(payload);
    }
    let (&pad, rest) = payload.split_first()?;
    rest.get(..rest.len().checked_sub(usize::from(pad))?)
}

/// A HEADERS payload's header block fragment: without padding and priority fields.
pub fn header_fragment(payload: &[u8], flags: u8) -> Option<&[u8]> {
    let p = unpad(payload, flags)?;
    if flags & PRIORITY != 0 {
        p.get(5..)
    } else {
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back() {
        let mut out = Vec::new();
        data(&mut out, 3, b"hello", true);
        let h = parse_head(&out).expect("9 bytes");
        assert_eq!(
            h,
            Head {
                len: 5,
                kind: Kind::Data,
                flags: END_STREAM,
                stream: 3
            }
        );
        assert_eq!(&out[HEADER_LEN..], b"hello");
        assert!(parse_head(&out[..8]).is_none());
        // The reserved bit is ignored.
        let mut r = out.clone();
        r[5] |= 0x80;
        assert_eq!(parse_head(&r).map(|h| h.stream), Some(3));
    }

    #[test]
    fn a_long_header_block_continues() {
        let block = vec![7u8; 40];
        let mut out = Vec::new();
        headers(&mut out, 1, &block, true, 16);
        let mut at = 0;
        let mut kinds = Vec::new();
        let mut got = Vec::new();
        while let Some(h) = parse_head(&out[at..]) {
            kinds.push((h.kind, h.flags));
            got.extend_from_slice(&out[at + HEADER_LEN..at + HEADER_LEN + h.len]);
            at += HEADER_LEN + h.len;
        }
        assert_eq!(
            kinds,
            [
                (Kind::Headers, END_STREAM),
                (Kind::Continuation, 0),
                (Kind::Continuation, END_HEADERS)
            ]
        );
        assert_eq!(got, block);
        let mut one = Vec::new();
        headers(&mut one, 1, &block, false, 16_384);
        assert_eq!(parse_head(&one).map(|h| h.flags), Some(END_HEADERS));
        // Written in place: the same frames as from a block apart.
        for max in [16, 16_384] {
            let mut apart = b"before".to_vec();
            headers(&mut apart, 1, &block, true, max);
            let mut in_place = b"before".to_vec();
            let at = headers_begin(&mut in_place);
            in_place.extend_from_slice(&block);
            headers_end(&mut in_place, at, 1, true, max);
            assert_eq!(in_place, apart);
        }
    }

    #[test]
    fn padding_and_priority_are_taken_off() {
        assert_eq!(unpad(b"\x02abcXX", PADDED), Some(&b"abc"[..]));
        assert_eq!(unpad(b"\x09abc", PADDED), None, "more padding than payload");
        assert_eq!(unpad(b"", PADDED), None);
        assert_eq!(
            header_fragment(b"\x01\0\0\0\x03\x10blockP", PADDED | PRIORITY),
            Some(&b"block"[..])
        );
        assert_eq!(header_fragment(b"\0\0", PRIORITY), None);
    }

    #[test]
    fn reasons_have_their_names() {
        assert_eq!(Reason::REFUSED_STREAM.to_string(), "REFUSED_STREAM");
        assert_eq!(Reason(0x99).to_string(), "error code 0x99");
    }
}
