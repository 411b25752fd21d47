//! A whole server: the cores (`runtime`), then the admin port on its own thread (`admin`),
//! which reads the state the cores share.

use crate::config::Config;
use crate::log::LogSink;
use crate::runtime::Running;

/// Start the cores, then the admin port. Stops the cores again if the admin port cannot start.
pub fn start(config: Config, access_log: Option<LogSink>) -> Result<Running, String> {
    let mut running = crate::runtime::start(config, access_log)?;
    let inbox = running
        .take_admin_inbox()
        .ok_or("the admin port's bus inbox is gone")?;
    match crate::admin::start(running.shared.clone(), inbox) {
        Ok(h) => {
            running.attach_admin(h);
            Ok(running)
        }
        Err(e) => {
            running.shutdown();
            running.join();
            Err(e)
        }
    }
}
