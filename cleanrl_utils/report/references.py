"""The works a report's paragraph cites (`references.bib` of the paper kit) and how the
paragraph cites them, in markdown (`(Machado et al., 2018)`) or LaTeX (`\\citep{...}`)."""

from __future__ import annotations

from cleanrl_utils.report.atari5 import BIBTEX

# (key, (authors, year), BibTeX entry)
REFERENCES = {
    "machado": (
        "machado2018revisiting",
        ("Machado et al.", 2018),
        """@article{machado2018revisiting,
  author = {Machado, Marlos C. and Bellemare, Marc G. and Talvitie, Erik and Veness, Joel and Hausknecht, Matthew and Bowling, Michael},
  title = {Revisiting the Arcade Learning Environment: Evaluation Protocols and Open Problems for General Agents},
  journal = {Journal of Artificial Intelligence Research},
  volume = {61},
  pages = {523--562},
  year = {2018}
}""",
    ),
    "bellemare": (
        "bellemare2013arcade",
        ("Bellemare et al.", 2013),
        """@article{bellemare2013arcade,
  author = {Bellemare, Marc G. and Naddaf, Yavar and Veness, Joel and Bowling, Michael},
  title = {The Arcade Learning Environment: An Evaluation Platform for General Agents},
  journal = {Journal of Artificial Intelligence Research},
  volume = {47},
  pages = {253--279},
  year = {2013}
}""",
    ),
    "agarwal": (
        "agarwal2021deep",
        ("Agarwal et al.", 2021),
        """@inproceedings{agarwal2021deep,
  author = {Agarwal, Rishabh and Schwarzer, Max and Castro, Pablo Samuel and Courville, Aaron and Bellemare, Marc G.},
  title = {Deep Reinforcement Learning at the Edge of the Statistical Precipice},
  booktitle = {Advances in Neural Information Processing Systems},
  volume = {34},
  year = {2021}
}""",
    ),
    "badia": (
        "badia2020agent57",
        ("Badia et al.", 2020),
        """@inproceedings{badia2020agent57,
  author = {Badia, Adri{\\`a} Puigdom{\\`e}nech and Piot, Bilal and Kapturowski, Steven and Sprechmann, Pablo and Vitvitskyi, Alex and Guo, Zhaohan Daniel and Blundell, Charles},
  title = {{Agent57}: Outperforming the {Atari} Human Benchmark},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning},
  series = {Proceedings of Machine Learning Research},
  volume = {119},
  pages = {507--517},
  year = {2020}
}""",
    ),
    "schulman": (
        "schulman2017proximal",
        ("Schulman et al.", 2017),
        """@article{schulman2017proximal,
  author = {Schulman, John and Wolski, Filip and Dhariwal, Prafulla and Radford, Alec and Klimov, Oleg},
  title = {Proximal Policy Optimization Algorithms},
  journal = {arXiv preprint arXiv:1707.06347},
  year = {2017}
}""",
    ),
    "huang": (
        "huang2022cleanrl",
        ("Huang et al.", 2022),
        """@article{huang2022cleanrl,
  author = {Huang, Shengyi and Dossa, Rousslan Fernand Julien and Ye, Chang and Braga, Jeff and Chakraborty, Dipam and Mehta, Kinal and Ara{\\'u}jo, Jo{\\~a}o G. M.},
  title = {{CleanRL}: High-quality Single-file Implementations of Deep Reinforcement Learning Algorithms},
  journal = {Journal of Machine Learning Research},
  volume = {23},
  number = {274},
  pages = {1--18},
  year = {2022}
}""",
    ),
}


def references_bib(atari5: bool = False) -> str:
    """The works the paragraph cites; Atari-5's paper too when the report has its estimate."""
    entries = [entry for _, _, entry in REFERENCES.values()] + ([BIBTEX] if atari5 else [])
    return "\n\n".join(entries) + "\n"


def cite(name: str, latex: bool) -> str:
    """`(Machado et al., 2018)`, or `\\citep{machado2018revisiting}`."""
    key, (authors, year), _ = REFERENCES[name]
    return f"\\citep{{{key}}}" if latex else f"({authors}, {year})"


def cite_t(name: str, latex: bool) -> str:
    """`Machado et al. (2018)`, or `\\citet{machado2018revisiting}`: the authors in the text."""
    key, (authors, year), _ = REFERENCES[name]
    return f"\\citet{{{key}}}" if latex else f"{authors} ({year})"
