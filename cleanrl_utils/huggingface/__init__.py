"""Sharing trained agents on the Hugging Face Hub (docs/sharing.md): `auth` (what an upload needs,
checked before training), `repo` (the repository folder of a run: model, model card, logs,
videos), `push` (one commit through `huggingface_hub`, retried; `python -m
cleanrl_utils.huggingface RUN_DIR`). Downloading and replaying is `cleanrl_utils.enjoy`."""
