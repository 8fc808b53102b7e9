"""The validate stage: benchmark rules, raw file I/O, errata."""
