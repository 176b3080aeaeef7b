"""What each benchmark is: the shared types (base.py), one module per benchmark (benchmarks/), the registry
(specs.py)."""
