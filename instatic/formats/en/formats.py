"""English formats as the admin shows times everywhere else: 24-hour, with the zone's name.

Django's own (``"N j, Y, P"``: "Dec. 6, 2026, 4:07 p.m.") is what a read-only time on a page
Django renders shows (a released release's "Goes out at"); other formats are Django's.
"""

DATETIME_FORMAT = "Y-m-d H:i:s T"
