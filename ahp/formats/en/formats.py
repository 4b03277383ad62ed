"""Times in the admin and the console to the second, as an operator reads a log: 2026-12-06 16:24:06."""
DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
TIME_FORMAT = "H:i:s"
