//! The incremental SSE scanner: it reads the payload bytes being forwarded (after chunk
//! framing), never copies an event's payload and allocates nothing per event. Events may be
//! split anywhere (mid-line, mid-CRLF). Comments, `event:` and multi-line `data:` are handled.
//! Each finished event is classified for the stream guard.

mod coalesce;
mod event;
pub mod json;
mod names;
pub mod watchdog;

pub use coalesce::{Coalesce, SPELLINGS as COALESCE_SPELLINGS};
pub use event::{Event, Kind, Totals, error_text};
use json::{Counts, JsonScan};

/// The stream guard's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamSettings {
    pub guard: bool,
    pub holdback_ms: u64,
    pub holdback_bytes: usize,
    pub readiness_timeout_ms: u64,
    pub total_timeout_ms: u64,
    pub watchdog: watchdog::WatchdogSettings,
    /// When the kernel may join a streamed answer's writes to the client into fuller segments
    /// (`MSG_MORE`): less CPU per event, each event held until the next ones join it (up to
    /// about 200 ms). By default only while the core is busy.
    pub coalesce_events: Coalesce,
    /// How late, in milliseconds, a core's tick may wake before it counts as late; a quarter of
    /// a second's ticks late makes the core busy (`core_load`).
    pub coalesce_busy_lag_ms: u32,
    /// The share of the last second, in percent, a core may wait for a CPU before it counts
    /// as busy (`core_load::cpu_wait`).
    pub coalesce_busy_wait_percent: u8,
    /// The keep-alive spacing for waiting streams, in ms (0 = off; `proxy::keepalive`).
    pub keepalive_ms: u32,
}

impl StreamSettings {
    /// The shipped settings, as a constant so that a relay without a configuration of its own
    /// can borrow them.
    pub const DEFAULT: StreamSettings = StreamSettings {
        guard: true,
        holdback_ms: 750,
        holdback_bytes: 64 * 1024,
        readiness_timeout_ms: 80_000,
        total_timeout_ms: 0,
        watchdog: watchdog::WatchdogSettings::DEFAULT,
        coalesce_events: Coalesce::WhenBusy,
        coalesce_busy_lag_ms: crate::core_load::LATE_MARK.as_millis() as u32,
        coalesce_busy_wait_percent: crate::core_load::WAIT_MARK_PERCENT,
        keepalive_ms: 0,
    };
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    /// Reading the field name at the start of a line.
    Name,
    Event,
    Data,
    Comment,
    Ignored,
}

const NAME_MAX: usize = 48;

#[derive(Clone, Debug)]
pub struct Scanner {
    field: Field,
    name: [u8; NAME_MAX],
    name_len: usize,
    /// Skip one space after the colon.
    skip_space: bool,
    /// A CR ended the last line; an LF right after it belongs to the same line end.
    after_cr: bool,
    /// The current line is empty so far (a blank line ends the event).
    line_empty: bool,
    event_name: [u8; NAME_MAX],
    event_len: usize,
    has_data: bool,
    data_lines: u32,
    /// `[DONE]` detection over the data bytes.
    done_match: usize,
    data_len: u64,
    json: JsonScan,
    names: names::Names,
    /// The class of this event's name when the fast path read it from the slice (then
    /// `event_name` was not copied).
    name_class: Option<names::NameClass>,
    saw_field: bool,
    pub totals: Totals,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner {
            field: Field::Name,
            name: [0; NAME_MAX],
            name_len: 0,
            skip_space: false,
            after_cr: false,
            line_empty: true,
            event_name: [0; NAME_MAX],
            event_len: 0,
            has_data: false,
            data_lines: 0,
            done_match: 0,
            data_len: 0,
            json: JsonScan::default(),
            names: names::Names::default(),
            name_class: None,
            saw_field: false,
            totals: Totals::default(),
        }
    }
}

const DONE: &[u8] = b"[DONE]";

impl Scanner {
    /// Feed payload bytes; `on_event` is called for each finished event.
    pub fn feed(&mut self, bytes: &[u8], mut on_event: impl FnMut(Event)) {
        let mut i = 0;
        while i < bytes.len() {
            if let Some(next) = self.fast_line(bytes, i, &mut on_event) {
                i = next;
                continue;
            }
            let b = bytes[i];
            i += 1;
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue; // the LF of a CRLF
                }
            }
            if b == b'\r' || b == b'\n' {
                self.after_cr = b == b'\r';
                self.end_line(&mut on_event);
                continue;
            }
            self.line_empty = false;
            match self.field {
                Field::Name => {
                    // Most lines are `data: ...`: take the field name in one step.
                    if self.name_len == 0 && bytes[i - 1..].starts_with(b"data:") {
                        self.name[..4].copy_from_slice(b"data");
                        self.name_len = 4;
                        i += 3; // at the colon
                        continue;
                    }
                    if b == b':' {
                        self.field = match &self.name[..self.name_len] {
                            b"" => Field::Comment,
                            b"event" => Field::Event,
                            b"data" => Field::Data,
                            _ => Field::Ignored,
                        };
                        if self.field == Field::Data {
                            if self.data_lines > 0 {
                                self.json.feed(b"\n");
                                self.data_len += 1;
                            }
                            self.data_lines += 1;
                            self.has_data = true;
                        }
                        if self.field == Field::Event {
                            self.event_len = 0;
                            self.name_class = None;
                        }
                        self.skip_space = true;
                    } else if self.name_len < NAME_MAX {
                        self.name[self.name_len] = b;
                        self.name_len += 1;
                    } else {
                        self.field = Field::Ignored;
                    }
                }
                Field::Event => {
                    if std::mem::take(&mut self.skip_space) && b == b' ' {
                        continue;
                    }
                    if self.event_len < NAME_MAX {
                        self.event_name[self.event_len] = b;
                        self.event_len += 1;
                    }
                }
                Field::Data => {
                    if std::mem::take(&mut self.skip_space) && b == b' ' {
                        continue;
                    }
                    i = self.data_run(bytes, i - 1);
                }
                Field::Comment | Field::Ignored => {}
            }
        }
    }

    /// The rest of a data line from `start`, fed in one go up to its end (CR or LF, left for
    /// the caller) or the end of this read; returns where it stopped.
    fn data_run(&mut self, bytes: &[u8], start: usize) -> usize {
        let first = self.data_len == 0 && self.data_lines == 1;
        let end = self
            .json
            .feed_line(&bytes[start..], first)
            .map_or(bytes.len(), |n| start + n);
        let run = &bytes[start..end];
        // `[DONE]` can only be the first six data bytes: extend the match while it holds.
        let before = self.data_len as usize;
        if before < DONE.len() && self.done_match == before {
            let same = run.iter().zip(&DONE[before..]).take_while(|(a, b)| a == b);
            self.done_match += same.count();
        }
        self.data_len += run.len() as u64;
        end
    }

    /// The common lines, taken in one step when a line starts with nothing pending:
    /// `event: <name>\n` right before `data:`, and `data:` itself, whose data runs through
    /// the JSON skim (which finds the line's end); a blank line right after ends the event
    /// here too. The byte-level path gives the same result (the property tests split streams
    /// anywhere to hold both to it). Returns where the byte loop goes on.
    #[inline]
    fn fast_line(
        &mut self,
        bytes: &[u8],
        i: usize,
        on_event: &mut impl FnMut(Event),
    ) -> Option<usize> {
        let fresh = self.line_empty
            && !self.after_cr
            && self.field == Field::Name
            && self.name_len == 0
            && !self.has_data;
        if !fresh {
            return None;
        }
        let rest = &bytes[i..];
        // `event: <name>\n` first (Anthropic, Responses): the name, then the data line.
        let (rest, at) = if rest.starts_with(b"event:") {
            let start = if rest.get(6) == Some(&b' ') { 7 } else { 6 };
            // A name longer than NAME_MAX is left to the byte path.
            let end = start + names::line_end_within(&rest[start..], NAME_MAX + 1)?;
            let name = &rest[start..end];
            if rest[end] != b'\n' || name.len() > NAME_MAX || !rest[end + 1..].starts_with(b"data:")
            {
                return None;
            }
            self.name_class = Some(self.names.class(name));
            self.event_len = 0;
            self.saw_field = true;
            (&rest[end + 1..], i + end + 1)
        } else {
            (rest, i)
        };
        if !rest.starts_with(b"data:") {
            return None;
        }
        // The state the byte path has after `data:` (the first data line of the event).
        self.field = Field::Data;
        self.line_empty = false;
        self.has_data = true;
        self.data_lines = 1;
        // One space after the colon is skipped, also when it comes in the next read.
        let start = match rest.get(5) {
            Some(b' ') => at + 6,
            Some(_) => at + 5,
            None => {
                self.skip_space = true;
                return Some(at + 5);
            }
        };
        let end = self.data_run(bytes, start);
        if bytes.get(end) == Some(&b'\n') && bytes.get(end + 1) == Some(&b'\n') {
            // What `end_line` does for the data line and then for the blank line.
            self.saw_field = true;
            self.field = Field::Name;
            self.line_empty = true;
            self.dispatch(on_event);
            return Some(end + 2);
        }
        Some(end)
    }

    /// The body ended: an event still open (no closing blank line) counts as dispatched.
    pub fn finish(&mut self, mut on_event: impl FnMut(Event)) {
        if !self.line_empty {
            self.end_line(&mut on_event);
        }
        self.dispatch(&mut on_event);
    }

    fn end_line(&mut self, on_event: &mut impl FnMut(Event)) {
        if self.line_empty {
            self.dispatch(on_event);
        } else {
            if self.field == Field::Name && self.name_len > 0 {
                // A field name with no colon: the whole line is the name, value empty.
                if &self.name[..self.name_len] == b"data" {
                    if self.data_lines > 0 {
                        self.json.feed(b"\n");
                    }
                    self.data_lines += 1;
                    self.has_data = true;
                }
            }
            if self.field == Field::Comment {
                self.totals.heartbeats += 1;
            } else {
                self.saw_field = true;
            }
        }
        self.field = Field::Name;
        self.name_len = 0;
        self.skip_space = false;
        self.line_empty = true;
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(Event)) {
        if !self.saw_field {
            return; // blank lines between events, or a comment-only block
        }
        let counts = self.json.finish();
        let name = match self.name_class.take() {
            Some(class) => class,
            None => self.names.class(&self.event_name[..self.event_len]),
        };
        let done = self.data_len == DONE.len() as u64 && self.done_match == DONE.len();
        let kind = classify(name, counts, done, self.has_data);
        let ev = Event {
            kind,
            text_bytes: if kind == Kind::Text { counts.text } else { 0 },
            counts,
        };
        let t = &mut self.totals;
        t.events += 1;
        t.text_bytes += u64::from(ev.text_bytes);
        match kind {
            Kind::Heartbeat => t.heartbeats += 1,
            Kind::Error => {
                t.errors += 1;
                if !t.decisive {
                    t.first_error_seen = true;
                }
            }
            Kind::Terminal => t.terminal = true,
            Kind::Protected => t.protected = true,
            Kind::Text => t.protected = false,
            _ => {}
        }
        t.useful |= matches!(kind, Kind::Text | Kind::Protected);
        if matches!(
            kind,
            Kind::Text | Kind::Protected | Kind::Error | Kind::Terminal
        ) {
            t.decisive = true;
        }
        if counts.input_tokens.is_some() {
            t.input_tokens = counts.input_tokens;
        }
        if counts.output_tokens.is_some() {
            t.output_tokens = counts.output_tokens;
        }
        if counts.cached_tokens.is_some() {
            t.cached_tokens = counts.cached_tokens;
        }
        on_event(ev);
        self.event_len = 0;
        self.has_data = false;
        self.data_lines = 0;
        self.done_match = 0;
        self.data_len = 0;
        self.saw_field = false;
        self.json.reset();
    }
}

/// The kind of a finished event, from its name, what its JSON held, and whether it was the
/// `[DONE]` marker.
fn classify(name: names::NameClass, c: Counts, done: bool, has_data: bool) -> Kind {
    if let Some(kind) = name.fixed {
        return kind;
    }
    if done {
        return Kind::Terminal;
    }
    if c.error {
        return Kind::Error;
    }
    if c.tool > 0 || c.reasoning > 0 {
        return if c.text > 0 {
            Kind::Text
        } else {
            Kind::Protected
        };
    }
    if name.protected_delta {
        return Kind::Protected;
    }
    if c.text > 0 {
        return Kind::Text;
    }
    if c.usage && (c.input_tokens.is_some() || c.output_tokens.is_some()) {
        return Kind::Usage;
    }
    if !has_data && name.empty {
        return Kind::Heartbeat;
    }
    Kind::Lifecycle
}

#[cfg(test)]
mod tests;
