"""What the scripts' training steps share: `--compile` and `--cudagraphs` (`compile`), the
explained variance they log (`metrics`)."""
