//! HTTP/1.1 framing of our own on httparse (see ARCHITECTURE.md for why not monoio-http).

pub mod buffers;
pub mod chunk;
mod framing;
pub mod h2frame;
pub mod head;
mod hop;
pub mod hpack;
pub mod io;
mod names;
pub mod nowait;
pub mod response;
pub mod server;
pub mod server_tls;
pub mod standing;

pub use chunk::ChunkTracker;
pub use head::{Framing, Head, HeadError, HeadLimits};
pub use names::names_mask;
