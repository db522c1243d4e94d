"""The operator TUI (SPEC §11): a Textual client of the broker's `/v1` API.

`pager` with no arguments opens it (`pager.tui.main.run_tui`). Textual runs on asyncio, so
nothing here imports trio or the server stack; the modules without Textual (`model`, `live`,
`sse`, `source`) are usable on their own.
"""
