//! A TLS upstream stream: rustls's unbuffered API fed from the core's scratch buffers, so a
//! held TLS stream holds no buffer while it waits.
//!
//! rustls's buffered connection keeps a 4 KiB record buffer per connection once it has read
//! (and monoio-rustls, before it, a 16 KiB read and a 16 KiB write buffer on top: a held TLS
//! stream cost 40 KiB of the proxy's memory against 8 for a plain one). Here, once readiness
//! says the socket has bytes, they are received into the core's scratch buffer
//! (`records`), rustls deframes and decrypts them there, the plaintext is copied into the
//! reader's (pooled) buffer, and the scratch is free again before the task next waits. What
//! a stream keeps between events is rustls's session (keys, sequence numbers), plus the
//! start of a record that has not fully arrived, in an allocation exactly its size (usually
//! none). rustls 0.23 still hands each record's plaintext over in a `Vec` of its own, freed
//! as soon as it is copied (in-place decryption is on its list), as its buffered API did.
//!
//! Dropping any future here at any `.await` is safe: no operation is ever left in flight,
//! rustls's state changes only inside synchronous calls, and records owed to the server
//! (handshake messages, a key update's answer, the rest of a write) wait in `unsent` until
//! the socket takes them, ahead of anything sent later.

mod records;
mod rent;

use super::tls_sessions::Owed;
use super::tls_sessions::Sessions;
use crate::http::nowait;
use bytes::BytesMut;
use monoio::net::TcpStream;
use records::{put, with_scratch};
use rustls::client::UnbufferedClientConnection;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::sync::Arc;

pub struct TlsStream {
    tcp: TcpStream,
    conn: UnbufferedClientConnection,
    /// Received bytes rustls has not finished with (the start of a record, or of a handshake
    /// message across records): given back to it, first, with the next bytes received.
    partial: Vec<u8>,
    /// Decrypted bytes the reader had no room for; `plain_at` is how many it has taken.
    plain: Vec<u8>,
    plain_at: usize,
    /// Records the socket did not take yet (it was full).
    unsent: Vec<u8>,
    /// The server sent close_notify: the end of its data.
    peer_closed: bool,
    /// The TCP connection ended; without close_notify first, the data may be cut.
    tcp_closed: bool,
    /// The last receive filled all the room it had ([`TlsStream::until_worth_reading`]).
    more_waiting: bool,
    /// The tickets its handshake is expected to bring to connects waiting in a burst, until
    /// its first data comes (`tls_sessions`).
    owed: Option<Box<Owed>>,
}

impl TlsStream {
    /// Open a TLS session on `tcp` and complete its handshake. `sessions`: the store that
    /// `config` resumes from, told what the handshake brings for a burst's waiting connects.
    pub async fn connect(
        tcp: TcpStream,
        config: Arc<rustls::ClientConfig>,
        name: rustls_pki_types::ServerName<'static>,
        sessions: Option<&Arc<Sessions>>,
    ) -> io::Result<TlsStream> {
        // Before the connection takes a kept ticket, if there is one.
        let owed = sessions.map(|s| Box::new(s.start(&name)));
        let conn = UnbufferedClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut s = TlsStream {
            tcp,
            conn,
            partial: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
            unsent: Vec::new(),
            peer_closed: false,
            tcp_closed: false,
            more_waiting: false,
            owed,
        };
        match s.handshake().await {
            Ok(()) => Ok(s),
            Err(e) => Err(s.alert_left(e)),
        }
    }

    async fn handshake(&mut self) -> io::Result<()> {
        // The first flight (ClientHello) needs nothing from the server.
        with_scratch(|scratch| self.process_partial(scratch))?;
        loop {
            self.send_unsent().await?;
            if !self.conn.is_handshaking() {
                self.note_tickets(false);
                return Ok(());
            }
            if self.peer_closed || self.tcp_closed {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection during the TLS handshake",
                ));
            }
            nowait::readable(&self.tcp).await?;
            self.receive_now(&mut [])?;
        }
    }

    /// A handshake whose write failed because the server had closed (`e`): the server may have
    /// said why just before, in a plaintext alert still waiting to be read (TLS 1.2 refuses a
    /// client certificate before any key is agreed), which says more than a broken pipe.
    #[cold]
    fn alert_left(&self, e: io::Error) -> io::Error {
        if !matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            return e;
        }
        // What rustls kept unread, else what the socket still holds.
        let mut waiting = [0u8; 64];
        let record = if !self.partial.is_empty() {
            &self.partial[..]
        } else if let Ok(Some(n)) = nowait::recv_slice(self.tcp.as_raw_fd(), &mut waiting) {
            &waiting[..n]
        } else {
            &[]
        };
        // An alert record: type 21, a version, a length of 2, its level and description.
        match record {
            [21, 3, _, 0, 2, _, description, ..] => {
                let alert = rustls::AlertDescription::from(*description);
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    rustls::Error::AlertReceived(alert),
                )
            }
            _ => e,
        }
    }

    /// Tell the session store what the handshake brought so far: the tickets, and whether
    /// the first data came after them (then it brings no more, and is done with).
    #[cold]
    fn note_tickets(&mut self, data_came: bool) {
        let resumed = self.resumed();
        let received = self.conn.tls13_tickets_received();
        // TLS 1.2 has no TLS 1.3 tickets to bring (its session is kept and reused instead).
        let tls12 = self.conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_2);
        if let Some(o) = &mut self.owed
            && o.note(resumed, received, data_came, tls12)
        {
            self.owed = None;
        }
    }

    /// Whether the handshake resumed an earlier session (rather than a full one).
    pub fn resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// The protocol the server chose in the handshake (ALPN), if it chose one.
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    /// The next decrypted bytes into `buf`. `park`: hold no pooled buffer while waiting for
    /// them (a held event stream waits far longer than it reads): `buf` takes one only when
    /// the socket has bytes. `standing`: an event stream's read, whose owner releases the
    /// standing poll its waits arm (`stream::TlsBody`); a read before the commit has none to
    /// release it, as its socket may be pooled or closed without a relay.
    pub async fn read_into(
        &mut self,
        buf: &mut BytesMut,
        park: bool,
        standing: bool,
    ) -> io::Result<usize> {
        loop {
            if park {
                crate::http::buffers::park(buf);
            }
            self.until_worth_reading(standing).await?;
            crate::http::io::make_room(buf);
            if let Some(n) = self.read_now(buf.spare_capacity_mut())? {
                // SAFETY: `read_now` initialised the first `n` bytes of the spare capacity.
                unsafe { buf.set_len(buf.len() + n) };
                return Ok(n);
            }
        }
    }

    /// The next decrypted bytes into `dst`: `Ok(0)` after the server's close_notify,
    /// `UnexpectedEof` when the TCP connection closed without one.
    async fn read_plain(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        loop {
            self.until_worth_reading(false).await?;
            if let Some(n) = self.read_now(dst)? {
                return Ok(n);
            }
        }
    }

    /// Wait for readiness unless a read can answer without the socket, or the last receive
    /// filled all its room (the socket likely holds more: a large answer is read back to
    /// back, as an epoll loop reads; a held stream's next event is waited for first).
    /// `standing`: an event stream's wait, through a standing poll where there is one
    /// (`http::standing`; its owner releases it, `stream::TlsBody`).
    async fn until_worth_reading(&self, standing: bool) -> io::Result<()> {
        if self.readable_now() || self.more_waiting {
            return Ok(());
        }
        let fd = self.tcp.as_raw_fd();
        if standing && crate::http::standing::ready(fd).await {
            return Ok(());
        }
        nowait::readable(&self.tcp).await
    }

    /// The socket's descriptor (its standing poll's key).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.tcp.as_raw_fd()
    }

    /// Whether a read can answer without the socket: decrypted bytes are waiting, or the
    /// stream has ended.
    fn readable_now(&self) -> bool {
        self.plain_at < self.plain.len() || self.peer_closed || self.tcp_closed
    }

    /// What can be read now into `dst`, receiving once if nothing is waiting: `Ok(None)` when
    /// there is nothing yet (wait for the socket and try again).
    fn read_now(&mut self, dst: &mut [MaybeUninit<u8>]) -> io::Result<Option<usize>> {
        if !self.readable_now() {
            let copied = self.receive_now(dst)?;
            if copied > 0 {
                return Ok(Some(copied));
            }
        }
        if self.plain_at < self.plain.len() {
            let n = put(dst, &self.plain[self.plain_at..]);
            self.plain_at += n;
            if self.plain_at == self.plain.len() {
                // A held stream keeps no allocation for a burst that is over.
                self.plain = Vec::new();
                self.plain_at = 0;
            }
            Ok(Some(n))
        } else if self.peer_closed {
            Ok(Some(0))
        } else if self.tcp_closed {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the TLS connection closed without close_notify",
            ))
        } else {
            Ok(None)
        }
    }

    /// Send the records the socket did not take yet, waiting while it is full.
    async fn send_unsent(&mut self) -> io::Result<()> {
        let fd = self.tcp.as_raw_fd();
        let mut sent = 0;
        while sent < self.unsent.len() {
            match nowait::send(fd, &self.unsent[sent..])? {
                0 => {
                    // What went is gone before the wait: a write dropped there sends on
                    // from the right byte next time.
                    self.unsent.drain(..sent);
                    sent = 0;
                    self.tcp.writable(false).await?;
                }
                n => sent += n,
            }
        }
        self.unsent = Vec::new();
        Ok(())
    }

    /// Whether the session took bytes off the socket that no read asked for, or saw the
    /// stream end: an idle pooled connection like that must not carry the next request
    /// (`UpConn::stirred` peeks at the socket for the rest).
    pub fn holds_unread(&self) -> bool {
        self.readable_now() || !self.partial.is_empty()
    }

    /// Encrypt as much of `slices` as rustls takes now and send it.
    async fn write_slices<'b>(
        &mut self,
        slices: impl Iterator<Item = &'b [u8]>,
    ) -> io::Result<usize> {
        self.send_unsent().await.map_err(|e| self.said_why(e))?;
        let taken = self.encrypt_now(slices).map_err(|e| self.said_why(e))?;
        self.send_unsent().await.map_err(|e| self.said_why(e))?;
        Ok(taken)
    }

    /// A write that failed because the server had closed (`e`): the server may have said why
    /// in an alert that came before its close and is still unread (TLS 1.3 refuses a client
    /// certificate after the client's handshake ended, so a request written at once meets the
    /// close). That alert says more than a reset; whatever else is waiting stays for a read.
    #[cold]
    #[inline(never)]
    fn said_why(&mut self, e: io::Error) -> io::Error {
        if !matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            return e;
        }
        match self.receive_now(&mut []) {
            Err(alert) if super::tls::refusal(&alert).is_some() => alert,
            _ => e,
        }
    }
}

#[cfg(test)]
mod tests;
