//! HPACK's header tables (RFC 7541 §2.3): the static table every peer knows, and a dynamic
//! table of the fields a peer chose to index, newest first, evicted oldest first to stay
//! within its size (each entry counts its name, its value and 32 bytes).

use std::collections::VecDeque;

/// RFC 7541 Appendix A: index 1 is the first.
pub const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// What an entry counts toward a table's size besides its bytes (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// A dynamic table: one allocation per entry, holding its name then its value.
#[derive(Debug)]
pub struct Dynamic {
    entries: VecDeque<(Box<[u8]>, usize)>,
    size: usize,
    max: usize,
}

impl Dynamic {
    pub fn new(max: usize) -> Dynamic {
        Dynamic {
            entries: VecDeque::new(),
            size: 0,
            max,
        }
    }

    /// Entry `i` (0: the newest) as (name, value).
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|(b, n)| b.split_at(*n))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The table's size as HPACK counts it.
    pub fn size(&self) -> usize {
        self.size
    }

    /// A new maximum size: entries beyond it are evicted.
    pub fn resize(&mut self, max: usize) {
        self.max = max;
        self.evict(0);
    }

    /// Add a field, evicting the oldest to make room; a field larger than the whole table
    /// empties it and is not added (RFC 7541 §4.4).
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.entries
            .push_front(([name, value].concat().into_boxed_slice(), name.len()));
        self.size += size;
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((b, _)) = self.entries.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= b.len() + ENTRY_OVERHEAD;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_entries_go_first_and_an_oversized_one_empties_the_table() {
        let mut t = Dynamic::new(100);
        t.insert(b"a", b"1"); // 34
        t.insert(b"b", b"2"); // 68
        assert_eq!((t.len(), t.size()), (2, 68));
        assert_eq!(t.get(0), Some((&b"b"[..], &b"2"[..])));
        t.insert(b"c", b"3"); // evicts "a"
        assert_eq!((t.len(), t.size()), (2, 68));
        assert_eq!(t.get(1), Some((&b"b"[..], &b"2"[..])));
        t.resize(40);
        assert_eq!((t.len(), t.size()), (1, 34));
        assert_eq!(t.get(0), Some((&b"c"[..], &b"3"[..])));
        t.insert(&[b'x'; 20], b"");
        assert!(t.is_empty(), "larger than the table: emptied, not added");
        assert_eq!(t.size(), 0);
    }
}
