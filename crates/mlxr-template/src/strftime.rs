//! Python's `datetime.strftime` for the formats chat templates use
//! (`strftime_now("%d %b %Y")`), over UTC. The C-locale names are used, as
//! Python does in a default process.

use std::fmt::Write;
use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// A broken-down UTC time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DateTime {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    /// 1..=31
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Monday, like Python's `weekday()`.
    pub weekday: u32,
    /// 1..=366
    pub day_of_year: u32,
}

impl DateTime {
    pub fn from_unix_secs(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        // 1970-01-01 was a Thursday (weekday 3).
        let weekday = (days + 3).rem_euclid(7) as u32;
        let day_of_year = (days - days_from_civil(year, 1, 1)) as u32 + 1;
        Self {
            year,
            month,
            day,
            hour: rem / 3600,
            minute: rem / 60 % 60,
            second: rem % 60,
            weekday,
            day_of_year,
        }
    }

    pub fn from_system_time(t: SystemTime) -> Self {
        let secs = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => d.as_secs() as i64,
            Err(e) => -(e.duration().as_secs_f64().ceil() as i64),
        };
        Self::from_unix_secs(secs)
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar, counting in 400-year eras so negative days need no special case.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // shift the epoch to 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153; // month counted from March
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Formats `t` like Python's `strftime(fmt)` on glibc. Unknown directives are
/// copied through unchanged, as glibc does.
pub(crate) fn strftime(fmt: &str, t: &DateTime) -> String {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(directive) = chars.next() else {
            out.push('%');
            break;
        };
        // Writing into a String cannot fail.
        let _ = write_directive(&mut out, directive, t);
    }
    out
}

fn write_directive(out: &mut String, directive: char, t: &DateTime) -> std::fmt::Result {
    let hour12 = match t.hour % 12 {
        0 => 12,
        h => h,
    };
    match directive {
        'a' => out.push_str(&DAYS[t.weekday as usize][..3]),
        'A' => out.push_str(DAYS[t.weekday as usize]),
        'b' | 'h' => out.push_str(&MONTHS[t.month as usize - 1][..3]),
        'B' => out.push_str(MONTHS[t.month as usize - 1]),
        'd' => write!(out, "{:02}", t.day)?,
        'e' => write!(out, "{:2}", t.day)?,
        'm' => write!(out, "{:02}", t.month)?,
        'y' => write!(out, "{:02}", t.year.rem_euclid(100))?,
        'Y' => write!(out, "{}", t.year)?,
        'H' => write!(out, "{:02}", t.hour)?,
        'I' => write!(out, "{:02}", hour12)?,
        'M' => write!(out, "{:02}", t.minute)?,
        'S' => write!(out, "{:02}", t.second)?,
        'p' => out.push_str(if t.hour < 12 { "AM" } else { "PM" }),
        'j' => write!(out, "{:03}", t.day_of_year)?,
        'u' => write!(out, "{}", t.weekday + 1)?,
        'w' => write!(out, "{}", (t.weekday + 1) % 7)?,
        'F' => write!(out, "{}-{:02}-{:02}", t.year, t.month, t.day)?,
        'D' => write!(
            out,
            "{:02}/{:02}/{:02}",
            t.month,
            t.day,
            t.year.rem_euclid(100)
        )?,
        'T' => write!(out, "{:02}:{:02}:{:02}", t.hour, t.minute, t.second)?,
        'R' => write!(out, "{:02}:{:02}", t.hour, t.minute)?,
        'c' => write!(
            out,
            "{} {} {:2} {:02}:{:02}:{:02} {}",
            &DAYS[t.weekday as usize][..3],
            &MONTHS[t.month as usize - 1][..3],
            t.day,
            t.hour,
            t.minute,
            t.second,
            t.year
        )?,
        'x' => write!(
            out,
            "{:02}/{:02}/{:02}",
            t.month,
            t.day,
            t.year.rem_euclid(100)
        )?,
        'X' => write!(out, "{:02}:{:02}:{:02}", t.hour, t.minute, t.second)?,
        'z' => out.push_str("+0000"),
        'Z' => out.push_str("UTC"),
        'n' => out.push('\n'),
        't' => out.push('\t'),
        '%' => out.push('%'),
        other => {
            out.push('%');
            out.push(other);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_over_four_centuries() {
        for days in (-200_000..200_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
    }

    #[test]
    fn known_instants() {
        // 2024-07-26 09:05:03 UTC, a Friday (values from Python's datetime).
        let t = DateTime::from_unix_secs(1_721_984_703);
        assert_eq!(strftime("%d %b %Y", &t), "26 Jul 2024");
        assert_eq!(strftime("%Y-%m-%d", &t), "2024-07-26");
        assert_eq!(strftime("%B %d, %Y", &t), "July 26, 2024");
        assert_eq!(
            strftime("%A %a %j %I:%M:%S %p", &t),
            "Friday Fri 208 09:05:03 AM"
        );
        assert_eq!(strftime("%H%%%q%", &t), "09%%q%");
        let epoch = DateTime::from_unix_secs(0);
        assert_eq!(strftime("%c", &epoch), "Thu Jan  1 00:00:00 1970");
        let leap = DateTime::from_unix_secs(951_825_600); // 2000-02-29 12:00:00
        assert_eq!(
            strftime("%F %T %y %j %w %u", &leap),
            "2000-02-29 12:00:00 00 060 2 2"
        );
        let before = DateTime::from_unix_secs(-1); // 1969-12-31 23:59:59
        assert_eq!(strftime("%F %T %a", &before), "1969-12-31 23:59:59 Wed");
    }
}
