"""The seeds' own experiments (`./scripts/lab seeds`): NURL, rust-http, Kourier, NextRush and
Lemire, each with its own load tool, flags, paths and answers, Peregrine in each table beside the
seed's published figures (run.py runs, tables.py writes report.md)."""
