//! One Ctrl-C handler for the process (ctrlc allows only one): it raises a
//! flag that the running pull or reply polls, instead of killing the program.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use anyhow::{Context, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: OnceLock<()> = OnceLock::new();

pub fn install() -> Result<()> {
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst))
        .context("installing the Ctrl-C handler")?;
    let _ = INSTALLED.set(());
    Ok(())
}

/// Whether Ctrl-C was pressed since the last `reset`.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub fn reset() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}
