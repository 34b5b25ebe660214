"""One run on many processes: torch's ranks under torchrun (`torch_ranks`), JAX's processes on
several hosts (`jax_processes`), what they must hold alike (`agreement`) and what one does when
another is lost (`lost_ranks`). `python -m cleanrl_utils.torchrun` starts torch's ranks."""
