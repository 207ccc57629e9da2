"""Errors of the plugins app; each message says what happened and what to do."""


class PluginDisabled(Exception):
    """Raised inside a run of a job whose plugin is disabled, so the ledger says it did not run."""


class ControlError(Exception):
    """An admin action on a plugin or plugin job that cannot be done (the message says why)."""
