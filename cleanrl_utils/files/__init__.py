"""The files a run writes and the tools read: run folder names (`run_names`), config.json
(`config`), atomic writes (`atomic`), checkpoint files and the state they hold (`state_file`),
model files (`model_file`), sweeps (`sweeps`), what a run ran on (`machine`), and a script of
`cleanrl/` imported by name (`scripts`)."""
