from rimo_eval.cli import entry

entry()
