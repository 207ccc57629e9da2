"""Development and test tooling: throwaway database servers and process helpers.

Nothing in here is imported by the running site; tests, benchmarks and ``make`` targets use it.
"""
