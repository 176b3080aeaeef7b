"""`lmms-contam report`: the contamination verdict from lmms-eval output files."""
