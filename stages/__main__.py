from stages.cli import entry

entry()
