//! The per-core world the request path runs in: the core's own tables and pools (`core`), what
//! all cores share through atomics and events (`Shared`), the rings of recent decision records
//! (`decisions`), the drain signal (`drain`), the process's phase (`lifecycle`), the client
//! connection caps (`conn_caps`, by descriptors `descriptor_cap`), and the applied configuration: its generations
//! (`generation`), the slots that keep state by identity across them (`slots`) and the reload
//! that makes the next one (`reload`).
//! Each core owns its `Core` as plain data; cores share only events and atomics.

pub mod audit_trail;
pub mod conn_caps;
pub mod core;
pub mod decisions;
pub mod descriptor_cap;
pub mod drain;
pub mod generation;
pub mod lifecycle;
pub mod reload;
pub mod slots;
