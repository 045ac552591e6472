"""Plain placeholders in every command's --help: ``FILE...``, ``N``, ``X``, ``table|json``, nothing after a
flag, where typer would print the Python type (``<list[Path]>``, ``<bool>``, ``<int range> [x>=1]``)."""

from __future__ import annotations

from typing import Any

# an option's placeholder by its name, where its type says too little
BY_NAME = {"threshold": "RATIO", "tolerance": "PCT", "fail_above": "PCT", "memory_limit": "SIZE", "sql": "SQL",
           "global_batch": "N", "cluster": "FILE", "profile_dir": "DIR", "input_dir": "DIR", "root": "DIR",
           "scheduler": "ADDRESS", "set_": "KEY=VALUE", "batches": "N,N,...", "ranks": "N,N,...",
           "before": "TRACE", "after": "TRACE", "sweep": "FILE", "folders": "DIR"}


def plain(command: Any) -> None:
    """Give every parameter of ``command`` (and of its subcommands) a plain placeholder where it has none."""
    for sub in getattr(command, "commands", {}).values():
        plain(sub)
    for param in getattr(command, "params", []):
        if getattr(param, "metavar", None) is None:
            param.metavar = _placeholder(param)
        if not hasattr(param, "is_flag"):  # an argument: its placeholder says it all (typer adds the Python type)
            param.display_type_rich = lambda ctx: None
            param.metavar = param.metavar.removesuffix("...")
    made = command.get_help_option

    def help_option(ctx: Any) -> Any:  # --help is made on demand: a flag, nothing after it
        option = made(ctx)
        if option is not None and option.metavar is None:
            option.metavar = ""
        return option

    command.get_help_option = help_option


def _placeholder(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return ""
    name = (param.name or "").lower()
    desc = getattr(param, "type_descriptor", None)
    many = "..." if getattr(param, "multiple", False) or getattr(param, "nargs", 1) != 1 or \
        (desc is not None and desc.is_list) else ""
    if name in BY_NAME:
        return BY_NAME[name] + many
    if desc is not None and desc.is_choice and desc.choices:
        return "|".join(str(getattr(c, "value", c)) for c in desc.choices)
    bare = param.bare_type().lower() if hasattr(param, "bare_type") else ""
    if (desc is not None and desc.is_path) or "path" in bare:
        return "FILE" + many
    if "int" in bare:
        return "N" + many
    if "float" in bare:
        return "X" + many
    return (param.name or "VALUE").upper() + many
