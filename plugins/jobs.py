"""The built-in plugins' jobs, discovered like any app's ``jobs.py`` (see ``plugins.sdk``).

The static export has nothing to do until ``INSTATIC_EXPORT_ROOT`` names a folder, so its job
is only declared then: an unconfigured site gets no ledger row a minute for nothing.
"""

from django.conf import settings

from plugins.builtin import retention

__all__ = ["retention"]

if getattr(settings, "INSTATIC_EXPORT_ROOT", ""):
    from plugins.builtin import static_export

    __all__ += ["static_export"]
