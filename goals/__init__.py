"""Example goal files; demo.yaml is the one `agent demo` runs."""
