"""Peregrine compliance and robustness probe (standard library only).

Modules:
    escapes     -- the escape syntax of the corpus ``raw`` strings
    wire        -- HTTP/1.x response parsing from raw bytes
    client      -- one exchange over a TCP connection, with close detection
    corpus      -- loading and validating the TOML case files
    verdict     -- turning an observation into pass/fail for a case
    runner      -- running cases in parallel
    sweeps      -- generated invalid-byte and percent-encoding sweeps
    robustness  -- slowloris, idle connections, resets, memory bounds...
    report      -- JSON and Markdown output
"""
