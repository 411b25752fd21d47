//! rustls's buffered server connection over a monoio socket: the handshake of the data port's
//! TLS (`proxy::connection::tls`, which then splits it) and the simulator front's whole TLS
//! (plain copies through small buffers, one read or write at a time).

use monoio::BufResult;
use monoio::buf::{IoBuf, IoBufMut, IoVecBuf, IoVecBufMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::sync::Arc;

pub struct ServerTls {
    tcp: TcpStream,
    conn: ServerConnection,
    /// Received TLS bytes rustls has not taken yet (it takes no more while the plaintext it
    /// decrypted waits to be read).
    incoming: Vec<u8>,
}

impl ServerTls {
    /// Complete the handshake on `tcp`.
    pub async fn accept(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
    ) -> io::Result<ServerTls> {
        let conn = ServerConnection::new(config).map_err(io::Error::other)?;
        let mut s = ServerTls {
            tcp,
            conn,
            incoming: Vec::new(),
        };
        while s.conn.is_handshaking() {
            s.send_records().await?;
            if !s.conn.is_handshaking() {
                break;
            }
            if s.receive_records().await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        s.send_records().await?;
        Ok(s)
    }

    /// The socket, the connection and the TLS bytes received but not yet taken.
    pub fn into_parts(self) -> (TcpStream, ServerConnection, Vec<u8>) {
        (self.tcp, self.conn, self.incoming)
    }

    /// Whether the handshake resumed an earlier session.
    pub fn resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// The protocol the handshake chose (ALPN).
    pub fn alpn(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }

    async fn send_records(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            let mut out = Vec::new();
            self.conn.write_tls(&mut out)?;
            self.tcp.write_all(out).await.0?;
        }
        Ok(())
    }

    /// Receive records (unless some wait to be taken) and give rustls what it takes; 0 at the
    /// peer's end.
    async fn receive_records(&mut self) -> io::Result<usize> {
        if self.incoming.is_empty() {
            let (r, mut buf) = self.tcp.read(vec![0u8; 16 * 1024]).await;
            let n = r?;
            if n == 0 {
                return Ok(0);
            }
            buf.truncate(n);
            self.incoming = buf;
        }
        let mut at = &self.incoming[..];
        let taken = self.conn.read_tls(&mut at)?;
        self.incoming.drain(..taken);
        self.conn
            .process_new_packets()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(taken.max(1))
    }

    async fn read_plain(&mut self, room: usize) -> io::Result<Vec<u8>> {
        loop {
            let mut out = vec![0u8; room];
            match self.conn.reader().read(&mut out) {
                Ok(n) => {
                    out.truncate(n);
                    return Ok(out);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // (Records owed to the client go out with the next write: the HTTP/2 codec reads
            // and writes at once, and two writes must not interleave.)
            if self.receive_records().await? == 0 {
                return Ok(Vec::new());
            }
        }
    }
}

impl AsyncReadRent for ServerTls {
    async fn read<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        let plain = match self.read_plain(buf.bytes_total()).await {
            Ok(p) => p,
            Err(e) => return (Err(e), buf),
        };
        // SAFETY: `plain` is no longer than the buffer's room (`bytes_total`), and the bytes
        // copied are then initialised, as `set_init` says.
        unsafe {
            std::ptr::copy_nonoverlapping(plain.as_ptr(), buf.write_ptr(), plain.len());
            buf.set_init(plain.len());
        }
        (Ok(plain.len()), buf)
    }

    async fn readv<T: IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        (Err(io::ErrorKind::Unsupported.into()), buf)
    }
}

impl ServerTls {
    /// Encrypt and send all of `bytes`: rustls takes plaintext only up to its buffer's limit
    /// (64 KiB), so a larger write goes in turns, each sent before the next is taken.
    async fn write_whole(&mut self, mut bytes: &[u8]) -> io::Result<usize> {
        let n = bytes.len();
        while !bytes.is_empty() {
            let taken = self.conn.writer().write(bytes)?;
            bytes = &bytes[taken..];
            self.send_records().await?;
        }
        Ok(n)
    }
}

impl AsyncWriteRent for ServerTls {
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // SAFETY: `read_ptr` points at `bytes_init` initialised bytes the buffer owns, and the
        // buffer is held (not moved or freed) until this returns it.
        let bytes = unsafe { std::slice::from_raw_parts(buf.read_ptr(), buf.bytes_init()) };
        let r = self.write_whole(bytes).await;
        (r, buf)
    }

    async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        // SAFETY: the runtime's own contract for vectored buffers: `read_iovec_ptr` points at
        // `read_iovec_len` iovecs, each over initialised bytes the buffer owns.
        let iovs =
            unsafe { std::slice::from_raw_parts(buf.read_iovec_ptr(), buf.read_iovec_len()) };
        let mut n = 0;
        for v in iovs {
            // SAFETY: as above, one iovec's bytes.
            let bytes = unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) };
            match self.write_whole(bytes).await {
                Ok(k) => n += k,
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(n), buf)
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.send_records().await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.send_records().await?;
        self.tcp.shutdown().await
    }
}
