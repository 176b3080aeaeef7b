"""The command line, one module per group of commands; each registers its commands on the parser."""
