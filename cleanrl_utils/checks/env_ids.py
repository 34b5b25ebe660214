"""Env ids, checked before any environment is built: each library's ids (EnvPool's Atari games,
ALE's vector env, gymnasium's `ALE/` ids) as a problem function (a line naming the id and the
nearest known ones, or None) and its raising form, `check_...` (one `error:` line, exit code 2).
The tuner's probe asks the problem functions by library (`ENV_ID_PROBLEMS`)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from cleanrl_utils.console.errors import fail


def game_of(env_id: str) -> str:
    """`Pong-v5`, `PongNoFrameskip-v4`, `ALE/Pong-v5` -> `pong`: the game, whatever the id style."""
    name = env_id.rpartition("/")[2]
    return re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name).lower()


def env_id_problem(env_id: str, known: Iterable[str], library: str) -> str | None:
    """Why `env_id` is not one of `library`'s `known` ids (with the ids it may have meant), or
    None: what `check_env_id` says."""
    known = list(known)
    if env_id in known:
        return None
    # the same game in the other id style first (`Pong-v5` given to a gymnasium script)
    same_game = [k for k in known if game_of(k) == game_of(env_id)]
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    suggestions = list(dict.fromkeys(same_game[:1] + close))[:3]
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
    return f"unknown env id {env_id!r} for {library}{hint}"


def check_env_id(env_id: str, known: Iterable[str], library: str) -> None:
    if problem := env_id_problem(env_id, known, library):
        fail(problem)


def envpool_atari_id_problem(env_id: str) -> str | None:
    """Only EnvPool's Atari ids: its other games (CartPole, MuJoCo, ...) have no lives or frames."""
    import envpool
    from envpool.registration import registry

    atari_ids = [i for i in envpool.list_all_envs() if registry.specs[i][0] == "envpool.atari"]
    return env_id_problem(env_id, atari_ids, "EnvPool's Atari games")


def ale_vector_id_problem(env_id: str) -> str | None:
    """ALE's Atari games for its vector env, spelt as ALE does (`ALE/Breakout-v5`) or as EnvPool
    does (`Breakout-v5`), so that command lines carry over between the two scripts."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    ale_ids = [
        i for i, spec in gym.registry.items() if spec.vector_entry_point and i.startswith("ALE/")
    ]
    ale_ids = [i for i in ale_ids if i.endswith("-v5")]
    ids = ale_ids + [i.removeprefix("ALE/") for i in ale_ids]
    return env_id_problem(env_id, ids, "ALE's vector env")


def gymnasium_atari_id_problem(env_id: str) -> str | None:
    """Only the ALE ids without frame skip (`*NoFrameskip-v4`): the scripts skip frames themselves."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    atari_ids = [  # (the `NoFrameskip-v0` ids repeat an action with probability 0.25)
        i
        for i, spec in gym.registry.items()
        if spec.entry_point == "ale_py.env:AtariEnv"
        and spec.kwargs.get("frameskip") == 1
        and spec.kwargs.get("repeat_action_probability", 0.0) == 0.0
    ]
    return env_id_problem(env_id, atari_ids, "gymnasium's Atari games without frame skip")


# the scripts' env id checks (each script calls one before building anything) exit with their
# problem's line; the tuner's probe asks the problem of the check a script imports
def check_envpool_atari_id(env_id: str) -> None:
    if problem := envpool_atari_id_problem(env_id):
        fail(problem)


def check_ale_vector_id(env_id: str) -> None:
    if problem := ale_vector_id_problem(env_id):
        fail(problem)


def check_gymnasium_atari_id(env_id: str) -> None:
    if problem := gymnasium_atari_id_problem(env_id):
        fail(problem)


ENV_ID_PROBLEMS = {
    check_envpool_atari_id: envpool_atari_id_problem,
    check_ale_vector_id: ale_vector_id_problem,
    check_gymnasium_atari_id: gymnasium_atari_id_problem,
}
