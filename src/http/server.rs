//! The plain HTTP/1.1 server loop of the ports that are not the data plane (the admin port,
//! the simulator): each request's head and whole body read within the port's limits, handed to
//! the port's handler with the connection, and the next request read while both sides keep it
//! alive. The data port has a loop of its own (`proxy::connection`): it streams bodies and
//! watches its clients.

use super::io::{ReadError, read_body, read_request_head};
use super::response::whole;
use super::{Head, HeadLimits};
use bytes::{Bytes, BytesMut};
use monoio::io::AsyncWriteRentExt;
use monoio::net::TcpStream;
use std::future::Future;
use std::time::Duration;

/// A port's limits on what it reads.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub head: HeadLimits,
    /// How long a kept-alive connection may wait for its next request.
    pub idle: Duration,
    /// How long a head may take once its first byte came.
    pub head_timeout: Duration,
    pub max_body: usize,
    pub body_timeout: Duration,
    /// The read buffer's first size.
    pub buffer: usize,
}

/// Serve `stream`: `handle` answers each request and gives the connection back to go on, or
/// `None` to close it. A head that cannot be read gets a plain 400; a body over the limit or
/// cut short closes the connection.
pub async fn serve<H, F>(mut stream: TcpStream, limits: Limits, mut handle: H)
where
    H: FnMut(Head, Bytes, TcpStream) -> F,
    F: Future<Output = Option<TcpStream>>,
{
    let _ = stream.set_nodelay(true);
    let mut buf = BytesMut::with_capacity(limits.buffer);
    loop {
        let read = read_request_head(
            &mut stream,
            &mut buf,
            limits.head,
            limits.idle,
            limits.head_timeout,
        );
        let head = match read.await {
            Ok(h) => h,
            Err(ReadError::Closed) | Err(ReadError::Io(_)) => return,
            Err(_) => {
                let _ = stream
                    .write_all(whole(400, "text/plain", &[], b"bad request\n", false))
                    .await;
                return;
            }
        };
        let read = read_body(
            &mut stream,
            &mut buf,
            head.framing,
            limits.max_body,
            limits.body_timeout,
        );
        let Ok(body) = read.await else {
            return;
        };
        match handle(head, body, stream).await {
            Some(s) => stream = s,
            None => return,
        }
    }
}

/// Write `bytes` and give the connection back if it is to be kept.
pub async fn reply(mut stream: TcpStream, bytes: Vec<u8>, keep: bool) -> Option<TcpStream> {
    let (res, _) = stream.write_all(bytes).await;
    (res.is_ok() && keep).then_some(stream)
}
