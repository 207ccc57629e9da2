"""Benchmarks: ``python -m bench`` (``make bench``) runs each module's ``main()``.

Every module here is a benchmark with a ``main() -> int`` that starts whatever throwaway
server it needs, prints a table of its numbers against their targets, and returns non-zero
when a target is missed. ``python -m bench lock`` runs one of them.
"""
