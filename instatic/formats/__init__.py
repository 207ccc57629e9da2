"""Date and time formats that replace Django's for the site's language (FORMAT_MODULE_PATH)."""
