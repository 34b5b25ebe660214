"""The evaluation protocols a run is trained and evaluated under: the five settings of the games
that decide which published numbers a score can be compared with (docs/protocols.md).

- `published`: the settings of the published CleanRL runs, each script's defaults: no sticky
  actions, the game's minimal action set, a lost life ends the agent's episode, up to 30 no-op
  starts, and the time limit of the runs (108,000 agent steps for EnvPool's and ALE's vector
  envs, as EnvPool 0.6 had it; ALE's own 108,000 frames, 27,000 agent steps, for the gymnasium
  scripts: `published(script)`);
- `machado`: Machado et al. (2018, "Revisiting the Arcade Learning Environment"): sticky actions
  (0.25), the full action set (18 actions), no life-loss signal, no no-op starts, games cut at
  108,000 frames (27,000 agent steps);
- `custom`: any other settings.

A script's `Args` has the five settings as fields, with the published values as defaults, and a
`protocol` field (`--protocol machado` sets the five at once); `cleanrl_utils.run.Run` resolves
it (`resolved`) and hands the settings to the script's `make_env` (`run.protocol`). What a run
records, in config.json and its model file, is `record(args)`.
"""

from __future__ import annotations

import copy
import dataclasses

from cleanrl_utils.console.errors import RunError

SETTINGS = (
    "repeat_action_probability",
    "full_action_space",
    "episodic_life",
    "noop_max",
    "max_episode_steps",
)
PUBLISHED = dict(
    repeat_action_probability=0.0,
    full_action_space=False,
    episodic_life=True,
    noop_max=30,
    max_episode_steps=108_000,
)
MACHADO = dict(
    repeat_action_probability=0.25,
    full_action_space=True,
    episodic_life=False,
    noop_max=0,
    max_episode_steps=27_000,
)
NAMES = ("published", "machado")
# the scripts on gymnasium's `*NoFrameskip-v4` ids: the published runs had ALE's own time limit
GYMNASIUM_SCRIPTS = ("ppo_atari", "ppo_atari_lstm", "ppo_atari_multigpu")


def published(script: str | None = None) -> dict:
    """The published CleanRL runs' settings for `script` (its name in cleanrl/, as a model file
    or a checkpoint names it): the same for every script but the time limit."""
    if script in GYMNASIUM_SCRIPTS:
        return PUBLISHED | dict(max_episode_steps=27_000)  # ALE's 108,000 frames
    return dict(PUBLISHED)


def _values(args) -> dict:
    return args if isinstance(args, dict) else vars(args)


def _published_of(args, script: str | None) -> dict:
    """The published settings for `args`: a script's `Args` has them as its defaults."""
    if script is None and dataclasses.is_dataclass(args):
        defaults = {f.name: f.default for f in dataclasses.fields(args)}
        if all(name in defaults for name in SETTINGS):
            return {name: defaults[name] for name in SETTINGS}
    return published(script)


def settings(args, script: str | None = None) -> dict:
    """The five settings of `args` (a script's `Args`, or a dict of arguments read from a file),
    as a script's `make_env` takes them; those it lacks (a file written before they could be
    set) are the published ones of `script`. Without `script`, arguments with none of them (not
    a script's): an empty dict."""
    values = _values(args)
    if script is None and not any(name in values for name in SETTINGS):
        return {}
    defaults = _published_of(args, script)
    return {name: values.get(name, defaults[name]) for name in SETTINGS}


def named(name: str, args=None, script: str | None = None) -> dict:
    """The settings of the protocol `name` (`published`: those of `args`' script)."""
    return dict(MACHADO) if name == "machado" else _published_of(args, script)


def name_of(values: dict, args=None, script: str | None = None) -> str:
    """`published`, `machado` or `custom`: the protocol whose settings `values` are."""
    for name in NAMES:
        if all(_equal(values[k], v) for k, v in named(name, args, script).items()):
            return name
    return "custom"


def _equal(a, b) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def record(args, script: str | None = None) -> dict | None:
    """What config.json and the model file record of a run's protocol: `{"name": "published" |
    "machado" | "custom", **the five settings}`; None for arguments without the settings.
    `args`: a script's `Args`, or a dict read from a file (with `script`: see `settings`)."""
    values = settings(args, script)
    if not values:
        return None
    return {"name": name_of(values, args, script), **values}


def describe(protocol: dict) -> str:
    """One line for a person: `the machado protocol (repeat_action_probability=0.25, ...)`."""
    values = ", ".join(f"{name}={protocol[name]}" for name in SETTINGS)
    return f"the {protocol['name']} protocol ({values})"


def flag(name: str, value=None) -> str:
    """`--name value` as a command line gives it (a switch: `--name` or `--no-name`)."""
    spelled = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return spelled if value else "--no-" + spelled[2:]
    return spelled if value is None else f"{spelled} {value}"


def protocol_problem(args, given: set[str]) -> str | None:
    """Why the protocol's settings of `args` cannot be used, or None: a `--protocol` that names
    none (`NAMES`), a setting given on the command line (`given`: field names) that contradicts
    the protocol given there too, a sticky-action probability outside [0, 1], a negative
    `--noop-max`."""
    values = _values(args)
    if "protocol" not in values:
        return None
    name = values["protocol"]
    if name is not None and name not in NAMES:
        return f"--protocol {name!r} is not a protocol: one of {', '.join(NAMES)}"
    if name is not None:
        for setting, value in named(name, args).items():
            if setting in given and not _equal(values[setting], value):
                return (
                    f"--protocol {name} means {flag(setting, value)}, and this command also gives "
                    f"{flag(setting, values[setting])}: drop one of them (without --protocol, "
                    "the settings as given make a custom protocol)"
                )
    rap = values.get("repeat_action_probability")
    if isinstance(rap, float | int) and not 0 <= rap <= 1:
        return f"--repeat-action-probability must be between 0 and 1, got {rap}"
    noop_max = values.get("noop_max")
    if isinstance(noop_max, int) and noop_max < 0:
        return f"--noop-max must be 0 (no no-op starts) or positive, got {noop_max}"
    return None


def resolved(args, given: set[str] = frozenset()):
    """`args` with `--protocol`'s settings (a new object; `args` is not changed): the settings
    given on the command line (`given`: field names) agree with it, the others take its values.
    Raises `RunError` with `protocol_problem`'s line when they cannot."""
    if problem := protocol_problem(args, given):
        raise RunError(problem)
    args = copy.copy(args)
    if getattr(args, "protocol", None) is not None:
        for setting, value in named(args.protocol, args).items():
            setattr(args, setting, value)
    return args
