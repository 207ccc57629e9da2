"""The built-in plugins' jobs, discovered like any app's ``jobs.py`` (see ``plugins.sdk``)."""

from plugins.builtin import retention, static_export

__all__ = ["retention", "static_export"]
