//! Cron expressions read in a time zone: when a schedule fires.
//!
//! Five fields (minute hour day-of-month month day-of-week), or six with seconds first,
//! names (`MON-FRI`, `JAN`) and nicknames (`@daily`) as `croner` reads them. Times
//! are stepped as wall-clock times in the zone, so daylight saving neither repeats nor
//! drops a day's firing: a time the clocks skip fires once, at the end of the gap
//! (02:30 on the spring-forward day fires at 03:00), and a time they repeat fires once,
//! at its first occurrence. Schedules stepping by the minute or hour keep stepping in
//! real time through both.

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// A parsed cron expression in its time zone.
#[derive(Debug, Clone)]
pub struct CronTimes {
    cron: Cron,
    tz: TimeZone,
}

impl CronTimes {
    /// Reads `expression` in the IANA zone `tz` (`UTC`, `Europe/Paris`), or says why it
    /// cannot, with a hint.
    pub fn parse(expression: &str, tz: &str) -> Result<CronTimes, String> {
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(expression)
            .map_err(|e| {
                format!(
                    "{} is not a cron expression ({e}); write five fields, minute hour day month weekday, like `0 9 * * MON-FRI`, or six with seconds first",
                    crate::quoted(expression)
                )
            })?;
        let tz = TimeZone::get(tz).map_err(|_| {
            format!(
                "{} is not a time zone this Weft knows; write an IANA name like `UTC` or `Europe/Paris`",
                crate::quoted(tz)
            )
        })?;
        Ok(CronTimes { cron, tz })
    }

    /// The first fire time strictly after `after_ms` (Unix milliseconds), if any.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let after = Timestamp::from_millisecond(after_ms)
            .ok()?
            .to_zoned(self.tz.clone());
        self.cron
            .find_next_occurrence(&after, false)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// The latest fire time at or before `at_ms`, if any.
    pub fn latest_at(&self, at_ms: i64) -> Option<i64> {
        let at = Timestamp::from_millisecond(at_ms)
            .ok()?
            .to_zoned(self.tz.clone());
        self.cron
            .find_previous_occurrence(&at, true)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// Up to `n` fire times after `after_ms`, in order.
    pub fn upcoming(&self, after_ms: i64, n: usize) -> Vec<i64> {
        std::iter::successors(self.next_after(after_ms), |t| self.next_after(*t))
            .take(n)
            .collect()
    }

    /// `ms` as a time in this zone, in RFC 3339 with its offset and zone.
    pub fn show(&self, ms: i64) -> String {
        Timestamp::from_millisecond(ms)
            .map(|t| t.to_zoned(self.tz.clone()).to_string())
            .unwrap_or_else(|_| ms.to_string())
    }

    /// `ms` as people read a time in this zone: `Mon 7 Dec 2026, 09:00 CET`.
    pub fn show_for_people(&self, ms: i64) -> String {
        Timestamp::from_millisecond(ms)
            .map(|t| {
                t.to_zoned(self.tz.clone())
                    .strftime("%a %-d %b %Y, %H:%M %Z")
                    .to_string()
            })
            .unwrap_or_else(|_| ms.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc3339: &str) -> i64 {
        rfc3339.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn shown(c: &CronTimes, times: Vec<i64>) -> Vec<String> {
        times.into_iter().map(|t| c.show(t)).collect()
    }

    #[test]
    fn a_time_reads_as_people_read_it_in_the_schedule_s_zone() {
        let paris = CronTimes::parse("0 9 * * *", "Europe/Paris").unwrap();
        let at = ms("2026-12-07T08:00:00Z");
        assert_eq!(paris.show_for_people(at), "Mon 7 Dec 2026, 09:00 CET");
        let summer = ms("2026-07-06T07:00:00Z");
        assert_eq!(paris.show_for_people(summer), "Mon 6 Jul 2026, 09:00 CEST");
    }

    #[test]
    fn a_time_the_clocks_skip_fires_once_at_the_end_of_the_gap() {
        let c = CronTimes::parse("30 2 * * *", "Europe/Paris").unwrap();
        let times = c.upcoming(ms("2026-03-27T12:00:00Z"), 3);
        assert_eq!(
            shown(&c, times),
            [
                "2026-03-28T02:30:00+01:00[Europe/Paris]",
                "2026-03-29T03:00:00+02:00[Europe/Paris]",
                "2026-03-30T02:30:00+02:00[Europe/Paris]",
            ]
        );
    }

    #[test]
    fn a_time_the_clocks_repeat_fires_once() {
        let c = CronTimes::parse("30 2 * * *", "Europe/Paris").unwrap();
        let times = c.upcoming(ms("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            shown(&c, times),
            [
                "2026-10-25T02:30:00+02:00[Europe/Paris]",
                "2026-10-26T02:30:00+01:00[Europe/Paris]",
            ]
        );
    }

    #[test]
    fn a_half_hourly_schedule_keeps_real_time_through_the_repeated_hour() {
        let c = CronTimes::parse("*/30 * * * *", "Europe/Paris").unwrap();
        let times = c.upcoming(ms("2026-10-25T00:10:00Z"), 4);
        let gaps: Vec<i64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, [1_800_000; 3], "{:?}", shown(&c, times));
    }

    #[test]
    fn weekdays_at_nine_in_a_zone_and_seconds_when_given() {
        let c = CronTimes::parse("0 9 * * MON-FRI", "Europe/Paris").unwrap();
        // Friday 2026-11-27, after nine: next Monday, Tuesday.
        let times = c.upcoming(ms("2026-11-27T12:00:00Z"), 2);
        assert_eq!(
            shown(&c, times),
            [
                "2026-11-30T09:00:00+01:00[Europe/Paris]",
                "2026-12-01T09:00:00+01:00[Europe/Paris]",
            ]
        );
        let every_second = CronTimes::parse("* * * * * *", "UTC").unwrap();
        assert_eq!(every_second.next_after(1_000), Some(2_000));
        assert_eq!(every_second.latest_at(2_500), Some(2_000));
    }

    #[test]
    fn bad_expressions_and_zones_are_explained() {
        let e = CronTimes::parse("every day", "UTC").unwrap_err();
        assert!(
            e.contains("not a cron expression") && e.contains("0 9 * * MON-FRI"),
            "{e}"
        );
        let e = CronTimes::parse("0 9 * * *", "Mars/Olympus").unwrap_err();
        assert!(e.contains("not a time zone"), "{e}");
        assert!(CronTimes::parse("61 * * * *", "UTC").is_err());
    }
}
