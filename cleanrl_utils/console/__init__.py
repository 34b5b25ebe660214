"""What every command of the project shares with its user: what it says and where (`output`),
how it ends (`errors`: the exit codes, `RunError`, `fail`, the entry guard), the stop signals
before a run holds them (`signals`), the progress bar (`progress`) and a missing optional
package in one line (`extras`). The lowest floor: it imports nothing else of the package."""
