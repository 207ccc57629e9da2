"""The example plugin from ``docs/plugins.md``; the plugin tests run it."""
