"""Dates as the dashboard shows them: ISO-like and short (2026-05-01 14:03:07), so that they read the same
everywhere and fit table columns. Django falls back to its own English formats for anything not set here."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
