"""Static HTML report of a local workspace (``kbot report --html DIR``); see ``build.py``."""
