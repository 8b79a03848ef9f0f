//! The daemon's recent log lines, kept in memory for `GET /api/mlxr/logs`.
//!
//! [`LogBuffer`] is a bounded ring of [`LogLine`]s plus a broadcast channel
//! for live followers. [`LogBuffer::layer`] is the `tracing_subscriber`
//! layer that feeds it; the CLI installs it next to its stderr formatter and
//! hands the same buffer to the server (no global state here). Cloning a
//! buffer shares it.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Lines kept by [`LogBuffer::default`].
pub const DEFAULT_CAPACITY: usize = 1000;

/// One formatted log event.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogLine {
    /// Increasing from 1; the SSE event id.
    pub seq: u64,
    /// RFC 3339, UTC, milliseconds.
    pub time: String,
    /// `ERROR`, `WARN`, `INFO`, `DEBUG` or `TRACE`.
    pub level: String,
    /// The module that logged it, e.g. `mlxr_server::server`.
    pub target: String,
    /// The message followed by the event's fields as `name=value`.
    pub message: String,
}

#[derive(Clone)]
pub struct LogBuffer {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    ring: Mutex<Ring>,
    live: broadcast::Sender<LogLine>,
    closed: watch::Sender<bool>,
}

struct Ring {
    lines: VecDeque<LogLine>,
    next_seq: u64,
}

impl Default for LogBuffer {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl std::fmt::Debug for LogBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBuffer")
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

impl LogBuffer {
    /// Keeps the last `capacity` lines (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        let (live, _) = broadcast::channel(capacity);
        let (closed, _) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                capacity,
                ring: Mutex::new(Ring {
                    lines: VecDeque::with_capacity(capacity),
                    next_seq: 1,
                }),
                live,
                closed,
            }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// The layer that appends every event it sees to this buffer.
    pub fn layer(&self) -> LogLayer {
        LogLayer {
            buffer: self.clone(),
        }
    }

    /// Appends a line (its `seq` is assigned here) and sends it to followers.
    pub fn push(&self, time: String, level: &str, target: &str, message: String) {
        let mut ring = self.ring();
        let line = LogLine {
            seq: ring.next_seq,
            time,
            level: level.to_string(),
            target: target.to_string(),
            message,
        };
        ring.next_seq += 1;
        if ring.lines.len() == self.inner.capacity {
            ring.lines.pop_front();
        }
        ring.lines.push_back(line.clone());
        // Sent under the lock so followers see lines in `seq` order; no
        // receivers is fine.
        let _ = self.inner.live.send(line);
    }

    /// The last `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<LogLine> {
        let ring = self.ring();
        let skip = ring.lines.len().saturating_sub(n);
        ring.lines.iter().skip(skip).cloned().collect()
    }

    /// The last `n` lines and a receiver of every later one, with no gap
    /// and no line twice.
    pub fn follow(&self, n: usize) -> (Vec<LogLine>, broadcast::Receiver<LogLine>) {
        let ring = self.ring();
        let receiver = self.inner.live.subscribe();
        let skip = ring.lines.len().saturating_sub(n);
        (ring.lines.iter().skip(skip).cloned().collect(), receiver)
    }

    /// Ends every follower's stream (the server is shutting down: open log
    /// streams must not hold up a graceful shutdown).
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
    }

    /// Becomes `true` once [`LogBuffer::close`] was called.
    pub fn closed(&self) -> watch::Receiver<bool> {
        self.inner.closed.subscribe()
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock leaves a consistent ring.
        self.inner.ring.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `tracing_subscriber` layer writing into a [`LogBuffer`].
pub struct LogLayer {
    buffer: LogBuffer,
}

impl<S: Subscriber> Layer<S> for LogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut visitor = MessageVisitor::default();
        event.record(&mut visitor);
        let meta = event.metadata();
        let time = chrono::Utc::now()
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        self.buffer
            .push(time, meta.level().as_str(), meta.target(), visitor.finish());
    }
}

/// `message` first, then `name=value` for the other fields.
#[derive(Default)]
struct MessageVisitor {
    message: String,
    fields: String,
}

impl MessageVisitor {
    fn finish(self) -> String {
        match (self.message.is_empty(), self.fields.is_empty()) {
            (_, true) => self.message,
            (true, false) => self.fields,
            (false, false) => format!("{} {}", self.message, self.fields),
        }
    }

    fn field(&mut self, name: &str, value: std::fmt::Arguments<'_>) {
        if !self.fields.is_empty() {
            self.fields.push(' ');
        }
        let _ = write!(self.fields, "{name}={value}");
    }
}

impl Visit for MessageVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.field(field.name(), format_args!("{value}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.field(field.name(), format_args!("{value:?}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    fn push(b: &LogBuffer, message: &str) {
        b.push("t".into(), "INFO", "x", message.into());
    }

    #[test]
    fn keeps_the_last_lines_in_order() {
        let b = LogBuffer::new(3);
        for i in 1..=5 {
            push(&b, &format!("line {i}"));
        }
        let tail = b.tail(10);
        let messages: Vec<_> = tail.iter().map(|l| l.message.as_str()).collect();
        assert_eq!(messages, ["line 3", "line 4", "line 5"]);
        assert_eq!(tail.iter().map(|l| l.seq).collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(b.tail(1)[0].message, "line 5");
        assert!(b.tail(0).is_empty());
        assert_eq!(LogBuffer::new(0).capacity(), 1);
    }

    #[test]
    fn followers_get_later_lines_once() {
        let b = LogBuffer::new(10);
        push(&b, "old");
        let (tail, mut rx) = b.follow(5);
        assert_eq!(tail.len(), 1);
        push(&b, "new");
        let line = rx.try_recv().unwrap();
        assert_eq!((line.seq, line.message.as_str()), (2, "new"));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn close_is_seen_by_followers() {
        let b = LogBuffer::default();
        let closed = b.closed();
        assert!(!*closed.borrow());
        b.close();
        assert!(*closed.borrow());
    }

    #[test]
    fn layer_formats_message_and_fields() {
        let b = LogBuffer::new(10);
        let subscriber = tracing_subscriber::registry().with(b.layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(path = "/health", status = 200, "request");
            tracing::warn!("only a message");
            tracing::error!(code = 7);
        });
        let lines = b.tail(10);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].message, "request path=/health status=200");
        assert_eq!(lines[0].level, "INFO");
        assert!(
            lines[0].target.ends_with("logs::tests"),
            "{}",
            lines[0].target
        );
        assert_eq!(lines[1].message, "only a message");
        assert_eq!(lines[1].level, "WARN");
        assert_eq!(lines[2].message, "code=7");
        assert!(lines[0].time.ends_with('Z') && lines[0].time.len() == 24);
    }
}
