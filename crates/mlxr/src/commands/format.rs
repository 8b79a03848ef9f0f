//! How the listing commands print sizes, times and tables (like `ollama`).

use chrono::{DateTime, Utc};

/// `1.2 GB`, `91 MB`, `512 B` (decimal units, as `ollama list`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value >= 10.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// "2 minutes ago", "4 minutes from now", "Forever" for far-off times.
pub fn relative_time(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (t - now).num_seconds();
    if seconds > 100 * 365 * 24 * 3600 {
        return "Forever".into();
    }
    let (amount, future) = (seconds.unsigned_abs(), seconds > 0);
    let span = if amount < 1 {
        return "Now".into();
    } else if amount < 60 {
        plural(amount, "second")
    } else if amount < 3600 {
        plural(amount / 60, "minute")
    } else if amount < 86400 {
        plural(amount / 3600, "hour")
    } else if amount < 30 * 86400 {
        plural(amount / 86400, "day")
    } else if amount < 365 * 86400 {
        plural(amount / (30 * 86400), "month")
    } else {
        plural(amount / (365 * 86400), "year")
    };
    if future {
        format!("{span} from now")
    } else {
        format!("{span} ago")
    }
}

fn plural(n: u64, unit: &str) -> String {
    match n {
        1 if unit == "hour" => "An hour".into(),
        1 => format!("1 {unit}"),
        n => format!("{n} {unit}s"),
    }
}

pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Left-aligned columns separated by at least three spaces.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}   ", width = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(91_000_000), "91 MB");
        assert_eq!(human_size(1_200_000_000), "1.2 GB");
    }

    #[test]
    fn times() {
        let now = Utc::now();
        let ago = now - chrono::Duration::seconds(150);
        assert_eq!(relative_time(ago, now), "2 minutes ago");
        let soon = now + chrono::Duration::seconds(4 * 60 + 30);
        assert_eq!(relative_time(soon, now), "4 minutes from now");
        assert_eq!(relative_time(DateTime::<Utc>::MAX_UTC, now), "Forever");
    }
}
