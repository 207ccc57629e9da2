"""The plugins that ship with Instatic: run-history retention and the static export.

Their jobs are declared by importing these modules from ``plugins/jobs.py``; each is its own
plugin (``run_retention``, ``static_export``) so it can be disabled on its own.
"""
