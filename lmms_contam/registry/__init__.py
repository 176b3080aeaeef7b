"""What each benchmark is: its spec (specs.py), how its rows read (parsers.py), its lmms-eval task (builtin.py)."""
