//! The records themselves: what goes between the socket, the core's scratch buffers and
//! rustls's unbuffered connection, all inside synchronous calls.

use super::TlsStream;
use crate::http::nowait;
use rustls::client::UnbufferedClientConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncodeTlsData, EncryptError};
use std::cell::RefCell;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};

/// The largest TLS record on the wire: 16 KiB of plaintext, TLS 1.2's bound of 2 KiB of
/// expansion (1.3's is 256 bytes), a 5-byte header.
const MAX_RECORD: usize = 5 + 16 * 1024 + 2048;

/// Plaintext one write encrypts before it sends (a long prompt goes in pieces this size).
const WRITE_CHUNK: usize = 64 * 1024;

/// The core's buffers for records on their way in and out, used only inside synchronous
/// calls (never across an `.await`), so one per core serves all its streams.
pub(super) struct Scratch {
    /// Received records: room for two whole ones, so a read takes what a burst brought. It
    /// grows if a handshake message spans more records than that (rustls bounds its size).
    incoming: Vec<u8>,
    /// Records to send: grows to what rustls says it needs.
    outgoing: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        incoming: vec![0; 2 * MAX_RECORD],
        outgoing: vec![0; WRITE_CHUNK + 1024],
    });
}

impl TlsStream {
    /// Receive what the socket holds (without waiting) into the core's scratch, after the
    /// bytes kept from before, and let rustls take it. Decrypted bytes go to `dst`, then to
    /// `plain`; how many went to `dst` is returned (0 when the socket had nothing, or only
    /// part of a record).
    pub(super) fn receive_now(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        with_scratch(|scratch| {
            let kept = self.partial.len();
            if scratch.incoming.len() < kept + MAX_RECORD {
                scratch.incoming.resize(kept + MAX_RECORD, 0);
            }
            scratch.incoming[..kept].copy_from_slice(&self.partial);
            // Plaintext is never longer than its records: a receive no larger than the
            // reader's room (but always room for a whole record) rarely leaves any over.
            let room = (scratch.incoming.len() - kept).min(dst.len().max(MAX_RECORD));
            let fd = self.tcp.as_raw_fd();
            let got = nowait::recv_slice(fd, &mut scratch.incoming[kept..kept + room])?;
            self.more_waiting = got == Some(room);
            let received = match got {
                None => return Ok(0),
                Some(0) => {
                    self.tcp_closed = true;
                    0
                }
                Some(n) => n,
            };
            let filled = kept + received;
            let mut records = std::mem::take(&mut scratch.incoming);
            let result = self.process(&mut records[..filled], dst, &mut scratch.outgoing);
            if let Ok((consumed, _)) = result {
                self.keep(&records[consumed..filled]);
            }
            scratch.incoming = records;
            let copied = result.map(|(_, copied)| copied)?;
            if self.owed.is_some() && !self.conn.is_handshaking() {
                self.note_tickets(copied > 0 || !self.plain.is_empty());
            }
            Ok(copied)
        })
    }

    /// Let rustls take the bytes kept from before, with nothing new (the first flight of the
    /// handshake; a check before a write that nothing is owed first).
    pub(super) fn process_partial(&mut self, scratch: &mut Scratch) -> io::Result<()> {
        let mut records = std::mem::take(&mut self.partial);
        let (consumed, _) = self.process(&mut records, &mut [], &mut scratch.outgoing)?;
        self.keep(&records[consumed..]);
        Ok(())
    }

    /// Keep `rest` (bytes rustls has not finished with) for the next receive; no allocation
    /// when there are none.
    fn keep(&mut self, rest: &[u8]) {
        if rest.is_empty() {
            self.partial = Vec::new();
        } else {
            self.partial.clear();
            self.partial.extend_from_slice(rest);
        }
    }

    /// Run rustls over `records` until it needs more bytes from the server or waits for us to
    /// send: decrypted bytes to `dst` as far as it has room, then to `plain`; records it asks
    /// to send (handshake messages, a key update's answer) to the socket now, or to `unsent`.
    /// Returns how many bytes of `records` rustls is done with, and how many went to `dst`.
    fn process(
        &mut self,
        records: &mut [u8],
        dst: &mut [MaybeUninit<u8>],
        out: &mut Vec<u8>,
    ) -> io::Result<(usize, usize)> {
        let fd = self.tcp.as_raw_fd();
        let mut at = 0;
        let mut copied = 0;
        loop {
            let status = self.conn.process_tls_records(&mut records[at..]);
            let discard = status.discard;
            let state = match status.state {
                Ok(state) => state,
                Err(e) => {
                    send_alert(&mut self.conn, fd, out);
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            };
            let stop = match state {
                ConnectionState::ReadTraffic(mut read) => {
                    while let Some(record) = read.next_record() {
                        let record =
                            record.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                        let n = put(&mut dst[copied..], record.payload);
                        copied += n;
                        self.plain.extend_from_slice(&record.payload[n..]);
                    }
                    false
                }
                ConnectionState::EncodeTlsData(mut encode) => {
                    let n = encode_into(&mut encode, out);
                    send_now(fd, &mut self.unsent, &out[..n])?;
                    false
                }
                ConnectionState::TransmitTlsData(transmit) => {
                    // Sent (or queued in `unsent`, which goes before anything else) as each
                    // record was encoded.
                    transmit.done();
                    false
                }
                ConnectionState::WriteTraffic(_) => true,
                ConnectionState::PeerClosed | ConnectionState::Closed => {
                    self.peer_closed = true;
                    true
                }
                ConnectionState::BlockedHandshake => true,
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "unexpected TLS state (early data)",
                    ));
                }
            };
            at += discard;
            if stop {
                return Ok((at, copied));
            }
        }
    }

    /// Encrypt as much of `slices` as one write takes ([`WRITE_CHUNK`]) and send what the
    /// socket takes now; the rest waits in `unsent`. Returns the plaintext bytes taken.
    pub(super) fn encrypt_now<'b>(
        &mut self,
        slices: impl Iterator<Item = &'b [u8]>,
    ) -> io::Result<usize> {
        with_scratch(|scratch| {
            // Anything rustls owes the server (from bytes kept from before) goes first.
            self.process_partial(scratch)?;
            let fd = self.tcp.as_raw_fd();
            let out = &mut scratch.outgoing;
            let status = self.conn.process_tls_records(&mut self.partial);
            let Ok(ConnectionState::WriteTraffic(mut write)) = status.state else {
                return Err(io::Error::other("the TLS session cannot send now"));
            };
            let mut taken = 0;
            let mut used = 0;
            'slices: for s in slices {
                for piece in s.chunks(16 * 1024) {
                    if taken + piece.len() > WRITE_CHUNK && taken > 0 {
                        break 'slices;
                    }
                    match write.encrypt(piece, &mut out[used..]) {
                        Ok(n) => used += n,
                        Err(EncryptError::InsufficientSize(need)) if used == 0 => {
                            out.resize(need.required_size, 0);
                            used += write.encrypt(piece, out).map_err(io::Error::other)?;
                        }
                        Err(EncryptError::InsufficientSize(_)) => break 'slices,
                        Err(e) => return Err(io::Error::other(e)),
                    }
                    taken += piece.len();
                }
            }
            send_now(fd, &mut self.unsent, &out[..used])?;
            Ok(taken)
        })
    }

    /// Queue close_notify (the end of our data) and send it.
    pub(super) fn close_now(&mut self) -> io::Result<()> {
        with_scratch(|scratch| {
            let fd = self.tcp.as_raw_fd();
            let status = self.conn.process_tls_records(&mut self.partial);
            if let Ok(ConnectionState::WriteTraffic(mut write)) = status.state {
                let n = write
                    .queue_close_notify(&mut scratch.outgoing)
                    .map_err(io::Error::other)?;
                send_now(fd, &mut self.unsent, &scratch.outgoing[..n])?;
            }
            Ok(())
        })
    }
}

pub(super) fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with_borrow_mut(f)
}

/// Copy as much of `src` into `dst` as fits; how much did.
pub(super) fn put(dst: &mut [MaybeUninit<u8>], src: &[u8]) -> usize {
    let n = src.len().min(dst.len());
    // SAFETY: both are valid for `n` bytes, and `src` (rustls's or our own memory) cannot
    // overlap `dst` (the reader's).
    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), n) };
    n
}

/// Encode a handshake record into `out`, growing it to what rustls needs.
fn encode_into(
    encode: &mut EncodeTlsData<'_, rustls::client::ClientConnectionData>,
    out: &mut Vec<u8>,
) -> usize {
    loop {
        match encode.encode(out) {
            Ok(n) => return n,
            Err(EncodeError::InsufficientSize(need)) => out.resize(need.required_size, 0),
            // Encoded already: nothing more to send for it.
            Err(_) => return 0,
        }
    }
}

/// Send `bytes` as far as the socket takes them now, after anything already waiting; keep
/// the rest in `unsent`.
fn send_now(fd: RawFd, unsent: &mut Vec<u8>, bytes: &[u8]) -> io::Result<()> {
    if !unsent.is_empty() {
        unsent.extend_from_slice(bytes);
        return Ok(());
    }
    let n = nowait::send(fd, bytes)?;
    unsent.extend_from_slice(&bytes[n..]);
    Ok(())
}

/// After a TLS error, send the alert rustls queued for it, if the socket takes it now (the
/// connection is given up either way).
fn send_alert(conn: &mut UnbufferedClientConnection, fd: RawFd, out: &mut Vec<u8>) {
    let status = conn.process_tls_records(&mut []);
    if let Ok(ConnectionState::EncodeTlsData(mut encode)) = status.state {
        let n = encode_into(&mut encode, out);
        let _ = nowait::send(fd, &out[..n]);
    }
}
