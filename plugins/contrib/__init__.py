"""Plugins shipped as examples; add one to ``INSTALLED_APPS`` to use it."""
