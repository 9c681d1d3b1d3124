"""Targets that start their own servers: a command with a `{port}` placeholder, started, health-checked, stopped."""
