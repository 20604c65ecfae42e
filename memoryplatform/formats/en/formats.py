"""Dates as the admin shows them: ISO-like and short, so a list's date column fits one line at 1366 px
("2026-11-26 04:01:07" rather than "Nov. 26, 2026, 4:01 a.m."). Times are UTC (TIME_ZONE)."""

DATETIME_FORMAT = "Y-m-d H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
