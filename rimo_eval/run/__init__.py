"""How every tool reads a run: one typed record (``record.Run``) opened by one reader
(``reader.RunReader``: one DVC repository handle per command, one index per revision).

A run is named as the workspace, a DVC experiment, a branch or a commit (``revision``); its
files are read through DVC at that revision (``files``: git for tracked files, the DVC cache
for outputs), so nothing is checked out. A table that is not there is an error that says what
brings it back in this repository (``recovery``). Kept light: import from the submodules.
"""
