//! The per-core world the request path runs in: the core's own tables and pools (`core`), what
//! all cores share through atomics and events (`Shared`), the rings of recent decision records
//! (`decisions`), the drain signal (`drain`), the process's phase (`lifecycle`) and the client connection caps (`conn_caps`).
//! Each core owns its `Core` as plain data; cores share only events and atomics.

pub mod conn_caps;
pub mod core;
pub mod decisions;
pub mod drain;
pub mod lifecycle;
