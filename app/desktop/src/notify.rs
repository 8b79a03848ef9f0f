//! Desktop notifications (org.freedesktop.Notifications over the session
//! bus, through GLib's D-Bus client, which the GTK stack brings anyway).

use std::collections::HashMap;

use gtk::gio;
use gtk::glib::{self, ToVariant};

/// Shows a notification; without a notification server it is only logged.
/// Call on the GTK (main) thread.
pub fn notify(summary: &str, body: &str) {
    eprintln!("mlxr-desktop: {summary}: {body}");
    let conn = match gio::bus_get_sync(gio::BusType::Session, gio::Cancellable::NONE) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mlxr-desktop: no session bus for notifications: {e}");
            return;
        }
    };
    let hints: HashMap<String, glib::Variant> = HashMap::new();
    let params = (
        "MLXR",
        0u32,
        "mlxr",
        summary,
        body,
        Vec::<String>::new(),
        hints,
        5000i32,
    )
        .to_variant();
    conn.call(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        "org.freedesktop.Notifications",
        "Notify",
        Some(&params),
        None,
        gio::DBusCallFlags::NONE,
        5000,
        gio::Cancellable::NONE,
        |result| {
            if let Err(e) = result {
                eprintln!("mlxr-desktop: notification not shown: {e}");
            }
        },
    );
}
