"""The games: the classic Atari wrappers (`atari_wrappers`), the evaluation protocols' five
settings (`protocols`) and the evaluation videos (`video`)."""
