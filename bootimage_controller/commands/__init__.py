"""The command line: the parser and one module per one-shot command."""
